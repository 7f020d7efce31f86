"""easgd-migrate: each rewrite on small sources, idempotence, files, backups and the CLI."""

import io
import os
import subprocess
import sys
import textwrap

import pytest
from absl import app

from tf_contrib_easgd.migrate import cli as migrate
from tf_contrib_easgd.migrate import codemod


def _migrate(source):
    """Migrates dedented `source`; returns the migrated text."""
    return codemod.migrate_source(textwrap.dedent(source)).code


def _expect(source, expected):
    """Asserts the exact migration of `source` and that migrating it again changes nothing."""
    result = _migrate(source)
    assert result == textwrap.dedent(expected)
    assert _migrate(result) == result


# --- Attribute access through any alias ------------------------------------------------------


def test_attribute_through_tf_alias_adds_the_import_once():
    _expect(
        """\
        import tensorflow as tf

        getter = tf.contrib.opt.ElasticAverageCustomGetter("/job:worker/task:0")
        opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter)  # keep me
        """,
        """\
        import tensorflow as tf
        import tf_contrib_easgd

        getter = tf_contrib_easgd.ElasticAverageCustomGetter("/job:worker/task:0")
        opt = tf_contrib_easgd.ElasticAverageOptimizer(sgd, 2, getter)  # keep me
        """,
    )


@pytest.mark.parametrize(
    ("imports", "expression"),
    [
        ("import tensorflow", "tensorflow.contrib.opt.ElasticAverageOptimizer"),
        ("import tensorflow as tf_lib", "tf_lib.contrib.opt.ElasticAverageOptimizer"),
        ("import tensorflow.compat.v1 as tf", "tf.contrib.opt.ElasticAverageOptimizer"),
        ("from tensorflow import contrib", "contrib.opt.ElasticAverageOptimizer"),
        ("from tensorflow.contrib import opt", "opt.ElasticAverageOptimizer"),
        ("from tensorflow.contrib import opt as copt", "copt.ElasticAverageOptimizer"),
        ("import tensorflow.contrib.opt as topt", "topt.ElasticAverageOptimizer"),
        (
            "from tensorflow.contrib.opt.python.training import elastic_average_optimizer as eao",
            "eao.ElasticAverageOptimizer",
        ),
        (
            "import tensorflow.contrib.opt.python.training.elastic_average_optimizer as eao",
            "eao.ElasticAverageOptimizer",
        ),
    ],
)
def test_attribute_through_every_kind_of_alias(imports, expression):
    result = _migrate(f"{imports}\n\nopt = {expression}(sgd, 2, getter)\n")
    assert "opt = tf_contrib_easgd.ElasticAverageOptimizer(sgd, 2, getter)\n" in result
    assert "import tf_contrib_easgd\n" in result
    assert "contrib" not in result.replace("tf_contrib_easgd", "")  # Unused import removed.
    assert not [f for f in codemod.migrate_source(result).findings if f.unconverted]


def test_dotted_contrib_import_keeps_binding_tensorflow():
    _expect(
        """\
        import tensorflow.contrib.opt

        opt = tensorflow.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter)
        x = tensorflow.constant(1)
        """,
        """\
        import tensorflow
        import tf_contrib_easgd

        opt = tf_contrib_easgd.ElasticAverageOptimizer(sgd, 2, getter)
        x = tensorflow.constant(1)
        """,
    )


@pytest.mark.parametrize(
    "name",
    [
        "ElasticAverageOptimizer",
        "ElasticAverageCustomGetter",
        "LOCAL_VARIABLE_NAME",
        "GLOBAL_VARIABLE_NAME",
        "GLOBAL_STEP",
    ],
)
def test_long_module_path_of_every_public_name(name):
    path = "tf.contrib.opt.python.training.elastic_average_optimizer"
    result = _migrate(f"import tensorflow as tf\n\nx = {path}.{name}\n")
    assert f"x = tf_contrib_easgd.{name}\n" in result


def test_private_hook_class_maps_to_the_public_one():
    _expect(
        """\
        from tensorflow.contrib.opt.python.training import elastic_average_optimizer as eao
        from tensorflow.contrib.opt.python.training.elastic_average_optimizer import (
            _ElasticAverageOptimizerHook)

        h = [eao._ElasticAverageOptimizerHook(o, True, 0), _ElasticAverageOptimizerHook]
        """,
        """\
        from tf_contrib_easgd import (
            ElasticAverageOptimizerHook as _ElasticAverageOptimizerHook)
        import tf_contrib_easgd

        h = [tf_contrib_easgd.ElasticAverageOptimizerHook(o, True, 0), _ElasticAverageOptimizerHook]
        """,
    )


def test_attribute_of_a_class_attribute_and_shadowed_alias():
    _expect(
        """\
        import tensorflow as tf

        beta = tf.contrib.opt.ElasticAverageOptimizer.BETA


        def f(tf):  # A parameter named tf is not tensorflow.
            return tf.contrib.opt.ElasticAverageOptimizer
        """,
        """\
        import tensorflow as tf
        import tf_contrib_easgd

        beta = tf_contrib_easgd.ElasticAverageOptimizer.BETA


        def f(tf):  # A parameter named tf is not tensorflow.
            return tf.contrib.opt.ElasticAverageOptimizer
        """,
    )


def test_existing_package_alias_is_reused():
    _expect(
        """\
        import tensorflow as tf
        import tf_contrib_easgd as easgd

        opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, easgd.ElasticAverageCustomGetter(""))
        """,
        """\
        import tensorflow as tf
        import tf_contrib_easgd as easgd

        opt = easgd.ElasticAverageOptimizer(sgd, 2, easgd.ElasticAverageCustomGetter(""))
        """,
    )


# --- from-imports -----------------------------------------------------------------------------


def test_from_contrib_opt_import():
    _expect(
        """\
        # Training script.
        from tensorflow.contrib.opt import ElasticAverageCustomGetter, ElasticAverageOptimizer
        from tensorflow.contrib.opt import ElasticAverageOptimizer as EAO

        opt = EAO(sgd, 2, ElasticAverageCustomGetter(""))
        """,
        """\
        # Training script.
        from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
        from tf_contrib_easgd import ElasticAverageOptimizer as EAO

        opt = EAO(sgd, 2, ElasticAverageCustomGetter(""))
        """,
    )


def test_from_module_import_constants_parenthesized():
    _expect(
        """\
        from tensorflow.contrib.opt.python.training.elastic_average_optimizer import (
            GLOBAL_STEP,
            GLOBAL_VARIABLE_NAME,
            LOCAL_VARIABLE_NAME,  # the local centres
        )
        """,
        """\
        from tf_contrib_easgd import (
            GLOBAL_STEP,
            GLOBAL_VARIABLE_NAME,
            LOCAL_VARIABLE_NAME,  # the local centres
        )
        """,
    )


def test_star_import_of_the_module():
    _expect(
        "from tensorflow.contrib.opt.python.training.elastic_average_optimizer import *\n",
        "from tf_contrib_easgd import *\n",
    )


def test_mixed_import_is_split_and_the_rest_reported():
    source = textwrap.dedent(
        """\
        from tensorflow.contrib.opt import ElasticAverageOptimizer, LazyAdamOptimizer

        opt = ElasticAverageOptimizer(LazyAdamOptimizer(0.1), 2, getter)
        """
    )
    migration = codemod.migrate_source(source)
    assert migration.code == textwrap.dedent(
        """\
        from tensorflow.contrib.opt import LazyAdamOptimizer
        from tf_contrib_easgd import ElasticAverageOptimizer

        opt = ElasticAverageOptimizer(LazyAdamOptimizer(0.1), 2, getter)
        """
    )
    # The import (line 1) and the use (line 4) of what is not EASGD stay, and are listed.
    unconverted = [f for f in migration.findings if f.unconverted]
    assert [f.line for f in unconverted] == [1, 4]
    assert "LazyAdamOptimizer" in unconverted[1].message


# --- What stays, and is reported --------------------------------------------------------------


def test_other_contrib_uses_are_reported_with_lines_of_the_migrated_file():
    source = textwrap.dedent(
        """\
        import tensorflow as tf

        getter = tf.contrib.opt.ElasticAverageCustomGetter("")
        net = tf.contrib.layers.fully_connected(x, 10)
        """
    )
    migration = codemod.migrate_source(source)
    # One line was added (the import), so the contrib.layers call is on line 5 now.
    assert migration.code.splitlines()[4] == "net = tf.contrib.layers.fully_connected(x, 10)"
    [finding] = [f for f in migration.findings if f.unconverted]
    assert finding.line == 5
    assert "tf.contrib.layers.fully_connected" in finding.message


@pytest.mark.parametrize(
    ("call", "named"),
    [
        # Neither given: one note names both defaults and both alternatives.
        ("opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter)", ("moving_rate", "rho")),
        (
            "opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, 10)",
            ("moving_rate", "rho"),
        ),
        # moving_rate by keyword, or fifth by position: rho alone.
        (
            "opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, moving_rate=0.45)",
            ("rho",),
        ),
        ("opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, 10, 0.45)", ("rho",)),
        ("opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, rho=0.0)", ("moving_rate",)),
        # Both given, or arguments the tool cannot see: no note.
        ("opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, 10, 0.45, 0.0)", ()),
        ("opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, **settings)", ()),
    ],
)
def test_each_optimizer_keeping_contribs_defaults_gets_a_note_on_their_cost(call, named):
    source = f"import tensorflow as tf\n\n{call}\n"
    migration = codemod.migrate_source(source)
    # The call is untouched but for the package's name: the defaults stay contrib's.
    assert call.replace("tf.contrib.opt.", "tf_contrib_easgd.") in migration.code
    notes = [f for f in migration.findings if "contrib's moving_rate" in f.message or
             "contrib's rho" in f.message]  # fmt: skip
    if not named:
        assert notes == []
        return
    [note] = notes
    assert not note.unconverted
    assert migration.code.splitlines()[note.line - 1].startswith("opt = tf_contrib_easgd.")
    alternatives = {"moving_rate": "moving_rate=0.9 / num_worker", "rho": "rho=0.0"}
    for name, alternative in alternatives.items():
        assert (f"{name}=None" in note.message) == (name in named)
        assert (alternative in note.message) == (name in named)
    assert "docs/TUNING.md" in note.message and "trains exactly as it did" in note.message


def test_source_without_contrib_is_unchanged():
    source = "import tensorflow as tf\n\nx = tf.constant(1)  # odd   spacing\n"
    migration = codemod.migrate_source(source)
    assert migration == codemod.Migration(code=source, findings=())


def test_non_string_source_is_a_type_error():
    with pytest.raises(TypeError, match="source must be a str, got bytes"):
        codemod.migrate_source(b"import tensorflow")


# --- tf.device with a device function ---------------------------------------------------------


@pytest.mark.parametrize(
    ("argument", "converted"),
    [
        ("tf.train.replica_device_setter(cluster=cluster)", True),
        ("tf.compat.v1.train.replica_device_setter(cluster=cluster)", True),
        ("lambda op: '/cpu:0'", True),
        ("setter", True),  # Bound to a replica_device_setter(...) below.
        ("choose_device", True),  # A function defined below.
        ("unknown_parameter", True),  # Unknown: tf.compat.v1.device takes strings too.
        ("'/cpu:0'", False),
        ("'/job:worker/task:%d' % index", False),
        ("f'/job:worker/task:{index}'", False),
        ("'/job:worker/task:{}'.format(index)", False),
        ("worker_device", False),  # Bound to a string below.
        ("variable.device", False),
        ("None", False),
    ],
)
def test_device_function_needs_compat_v1_device(argument, converted):
    source = textwrap.dedent(
        f"""\
        import tensorflow as tf

        setter = tf.train.replica_device_setter(cluster=cluster)
        worker_device = "/job:worker/task:%d" % index


        def choose_device(op):
            return "/cpu:0"


        with tf.device({argument}):
            pass
        """
    )
    result = codemod.migrate_source(source).code
    call = "tf.compat.v1.device" if converted else "tf.device"
    # A replica_device_setter(...) at the top level makes the module a script: the switch too.
    switch = "import tensorflow as tf\n\ntf.compat.v1.disable_v2_behavior()\n"
    expected = source.replace("tf.device(", f"{call}(")
    assert result == expected.replace("import tensorflow as tf\n", switch)
    assert codemod.migrate_source(result).code == result


def test_device_imported_by_name_and_v1_device_left_alone():
    _expect(
        """\
        import tensorflow as tf
        from tensorflow import device

        with device(tf.train.replica_device_setter()), device("/cpu:0"):
            with tf.compat.v1.device(lambda _: ""):
                pass
        """,
        """\
        import tensorflow as tf
        from tensorflow import device

        tf.compat.v1.disable_v2_behavior()

        with tf.compat.v1.device(tf.train.replica_device_setter()), device("/cpu:0"):
            with tf.compat.v1.device(lambda _: ""):
                pass
        """,
    )


# --- disable_v2_behavior ----------------------------------------------------------------------

SCRIPT = '''\
"""A TF1 script."""

from __future__ import print_function

import tensorflow as tf
# The model.
from tensorflow.contrib.opt import ElasticAverageOptimizer
FLAGS = None


def main(_):
    x = tf.placeholder(tf.float32)


if __name__ == "__main__":
    tf.app.run()
'''


def test_disable_v2_behavior_added_once_after_the_imports():
    result = _migrate(SCRIPT)
    assert result == SCRIPT.replace(
        "from tensorflow.contrib.opt import ElasticAverageOptimizer\nFLAGS = None\n",
        "from tf_contrib_easgd import ElasticAverageOptimizer\n"
        "\n"
        "tf.compat.v1.disable_v2_behavior()\n"
        "\n"
        "FLAGS = None\n",
    )
    assert _migrate(result) == result


def test_windows_line_endings_are_kept():
    source = SCRIPT.replace("\n", "\r\n")
    result = codemod.migrate_source(source).code
    assert "tf.compat.v1.disable_v2_behavior()\r\n" in result
    assert "\n" not in result.replace("\r\n", "")


def test_disable_v2_behavior_goes_after_the_import_of_tensorflow():
    _expect(
        """\
        import os
        import sys

        sys.path.insert(0, os.path.dirname(__file__))
        try:
            import tensorflow as tf
        except ImportError:
            tf = None
        x = 1

        if __name__ == "__main__":
            tf.compat.v1.Session()
        """,
        """\
        import os
        import sys

        sys.path.insert(0, os.path.dirname(__file__))
        try:
            import tensorflow as tf
        except ImportError:
            tf = None

        tf.compat.v1.disable_v2_behavior()

        x = 1

        if __name__ == "__main__":
            tf.compat.v1.Session()
        """,
    )


def test_imports_and_switch_in_a_module_without_imports_on_top():
    _expect(
        """\
        # A comment on top.
        x = 1
        import tensorflow as tf
        opt = tf.contrib.opt.ElasticAverageOptimizer

        if __name__ == "__main__":
            tf.compat.v1.Session()
        """,
        """\
        # A comment on top.
        import tf_contrib_easgd

        x = 1
        import tensorflow as tf

        tf.compat.v1.disable_v2_behavior()

        opt = tf_contrib_easgd.ElasticAverageOptimizer

        if __name__ == "__main__":
            tf.compat.v1.Session()
        """,
    )


def test_disable_v2_behavior_spelled_for_a_compat_v1_alias():
    source = "import tensorflow.compat.v1 as tf\n\nif __name__ == '__main__':\n    tf.Session()\n"
    assert _migrate(source) == source.replace("\n\nif", "\n\ntf.disable_v2_behavior()\n\nif")


@pytest.mark.parametrize(
    "source",
    [
        # Picks its mode itself.
        "import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\n"
        "if __name__ == '__main__':\n    tf.compat.v1.placeholder(tf.float32)\n",
        "import tensorflow as tf\n"
        "if __name__ == '__main__':\n    tf.compat.v1.enable_v2_behavior()\n    tf.Session()\n",
        # A script that builds no graph.
        "import tensorflow as tf\nif __name__ == '__main__':\n    print(tf.constant(1))\n",
    ],
)
def test_disable_v2_behavior_not_added(source):
    assert _migrate(source) == source


# A tutorial written at module level: flags, the cluster, the server and the graph run on
# import, with no main guard. It is a script, and gets the switch.
MODULE_LEVEL_SCRIPT = """\
import tensorflow as tf

cluster = tf.train.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
if FLAGS.job_name == "ps":
    server.join()
else:
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x = tf.placeholder(tf.float32)
"""


def test_a_module_level_script_gets_the_switch():
    _expect(
        MODULE_LEVEL_SCRIPT,
        MODULE_LEVEL_SCRIPT.replace(
            "import tensorflow as tf\n",
            "import tensorflow as tf\n\ntf.compat.v1.disable_v2_behavior()\n",
        ).replace("with tf.device(", "with tf.compat.v1.device("),
    )
    assert codemod.migrate_source(MODULE_LEVEL_SCRIPT).findings == ()


@pytest.mark.parametrize(
    "top_level",
    [
        "sess = tf.compat.v1.Session()",  # Opens a session.
        "x = tf.compat.v1.placeholder(tf.float32)",  # Builds a graph.
        "with tf.compat.v1.variable_scope('model'):\n    pass",
        "if True:\n    tf.compat.v1.train.MonitoredTrainingSession()",  # In any block.
        "for _ in range(2):\n    tf.compat.v1.get_variable('w', [1])",
        "tf.compat.v1.app.run(lambda argv: None)",  # Runs its main unguarded.
        "server = tf.distribute.Server(cluster, 'worker', 0)",
    ],
)
def test_tensorflow_work_at_the_top_level_makes_a_script(top_level):
    source = (
        "import tensorflow as tf\n\n\ndef model():\n    return tf.compat.v1.Session\n\n\n"
        f"{top_level}\n"
    )
    migration = codemod.migrate_source(source)
    assert "\ntf.compat.v1.disable_v2_behavior()\n" in migration.code
    assert not [f for f in migration.findings if "library" in f.message]


@pytest.mark.parametrize(
    "top_level",
    [
        "FLAGS = tf.compat.v1.app.flags.FLAGS",  # Not a graph.
        "session_class = tf.compat.v1.Session",  # Named, not called.
        "make = lambda: tf.compat.v1.Session()",  # Called later, by whoever calls `make`.
        "getter = tf.contrib.opt.ElasticAverageCustomGetter('')",  # Makes no graph yet.
        "class Model:\n    def build(self):\n        return tf.compat.v1.placeholder(tf.float32)",
    ],
)
def test_graph_building_inside_functions_keeps_a_library_a_library(top_level):
    source = (
        "import tensorflow as tf\n\n\ndef model(getter):\n"
        "    return tf.contrib.opt.ElasticAverageOptimizer(tf.get_variable('w', [1]), 1, getter)"
        f"\n\n\n{top_level}\n"
    )
    migration = codemod.migrate_source(source)
    assert "disable_v2_behavior()" not in migration.code
    # The library note, and the optimizer's note on contrib's defaults.
    [note, defaults] = migration.findings
    assert "looks like a library" in note.message
    assert "keeps contrib's moving_rate=None" in defaults.message


def test_migrated_library_module_gets_a_note_not_the_switch():
    source = textwrap.dedent(
        """\
        import tensorflow as tf


        def model(getter):
            return tf.contrib.opt.ElasticAverageOptimizer(tf.get_variable("w", [1]), 1, getter)
        """
    )
    migration = codemod.migrate_source(source)
    assert "disable_v2_behavior" not in migration.code
    [note, defaults] = migration.findings  # Also: the optimizer keeps contrib's defaults.
    assert not note.unconverted
    assert "disable_v2_behavior" in note.message
    assert "keeps contrib's moving_rate=None" in defaults.message


# --- Files, backups, dry run ------------------------------------------------------------------

LEGACY = "import tensorflow as tf\n\ngetter = tf.contrib.opt.ElasticAverageCustomGetter('')\n"
MIGRATED = (
    "import tensorflow as tf\nimport tf_contrib_easgd\n\n"
    "getter = tf_contrib_easgd.ElasticAverageCustomGetter('')\n"
)


def _run(*paths, **kwargs):
    """Runs `migrate.run` and returns (status, stdout text, stderr text)."""
    out, err = io.StringIO(), io.StringIO()
    status = migrate.run([str(p) for p in paths], out=out, err=err, **kwargs)
    return status, out.getvalue(), err.getvalue()


def test_run_rewrites_in_place_with_a_backup(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    status, out, err = _run(script)
    assert (status, out) == (migrate.EXIT_OK, "")
    assert script.read_text() == MIGRATED
    assert (tmp_path / "train.py.bak").read_text() == LEGACY
    assert "1 changed, 0 use(s) not converted" in err

    status, _, err = _run(script)  # Idempotent: nothing left to do, no new backup.
    assert status == migrate.EXIT_OK
    assert "0 changed" in err
    assert (tmp_path / "train.py.bak").read_text() == LEGACY


def test_existing_backup_is_never_overwritten(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    (tmp_path / "train.py.bak").write_text("the first original\n")
    _, _, err = _run(script)
    assert "the older " in err
    assert (tmp_path / "train.py.bak").read_text() == "the first original\n"
    assert script.read_text() == MIGRATED


def test_no_backup(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    _run(script, backup=False)
    assert script.read_text() == MIGRATED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_dry_run_prints_a_unified_diff_and_writes_nothing(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    status, out, err = _run(script, dry_run=True)
    assert status == migrate.EXIT_OK
    assert out.startswith(f"--- a/{script}\n+++ b/{script}\n@@ ")
    assert "-getter = tf.contrib.opt.ElasticAverageCustomGetter('')\n" in out
    assert "+import tf_contrib_easgd\n" in out
    assert script.read_text() == LEGACY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
    assert "1 would change" in err


def test_directories_are_searched_skipping_hidden_folders(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / ".venv").mkdir()
    for path in (tmp_path / "a.py", tmp_path / "pkg" / "b.py", tmp_path / ".venv" / "c.py"):
        path.write_text(LEGACY)
    (tmp_path / "notes.txt").write_text(LEGACY)
    status, _, err = _run(tmp_path, backup=False)
    assert status == migrate.EXIT_OK
    assert "2 file(s) checked, 2 changed" in err
    assert (tmp_path / "pkg" / "b.py").read_text() == MIGRATED
    assert (tmp_path / ".venv" / "c.py").read_text() == LEGACY
    assert (tmp_path / "notes.txt").read_text() == LEGACY


def test_unconverted_uses_are_listed_with_file_and_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY + "net = tf.contrib.layers.fully_connected(x, 10)\n")
    status, _, err = _run(script, backup=False)
    assert status == migrate.EXIT_UNCONVERTED
    # Line 4 of the original is line 5 of the migrated file (one import was added).
    assert f"{script}:5: not converted: `tf.contrib.layers.fully_connected`" in err
    assert "1 use(s) not converted" in err


def test_unparsable_file_is_an_error_and_the_others_still_migrate(tmp_path):
    (tmp_path / "bad.py").write_text("def broken(:\n")
    (tmp_path / "good.py").write_text(LEGACY)
    status, _, err = _run(tmp_path, backup=False)
    assert status == migrate.EXIT_ERROR
    assert f"{tmp_path / 'bad.py'}:1: cannot migrate: not valid Python 3: invalid syntax." in err
    assert (tmp_path / "good.py").read_text() == MIGRATED
    assert (tmp_path / "bad.py").read_text() == "def broken(:\n"


def test_missing_path_is_reported_before_anything_is_written(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY)
    with pytest.raises(FileNotFoundError, match="PATH '.*missing.py' is neither a file nor"):
        _run(script, tmp_path / "missing.py")
    assert script.read_text() == LEGACY


# --- The command line (a subprocess each: TensorFlow is imported with the package) ------------


def _cli(*args, cwd):
    """Runs `python -m tf_contrib_easgd.migrate ARGS` in `cwd`; returns the finished process."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "tf_contrib_easgd.migrate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.subprocess
def test_cli_dry_run_with_unconverted_use_exits_1(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LEGACY + "net = tf.contrib.layers.fully_connected(x, 10)\n")
    done = _cli("--dry_run", "train.py", cwd=tmp_path)
    assert done.returncode == migrate.EXIT_UNCONVERTED, done.stderr
    assert done.stdout.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "train.py:5: not converted:" in done.stderr
    assert script.read_text().startswith(LEGACY)
    assert not (tmp_path / "train.py.bak").exists()


@pytest.mark.subprocess
@pytest.mark.parametrize("module", [False, True], ids=["easgd-migrate --help", "python -m -h"])
def test_cli_help_lists_the_flags_and_exits_0(tmp_path, module):
    # absl's help exits with 1, which here would mean "some use could not be converted".
    if module:
        done = _cli("-h", cwd=tmp_path)
    else:
        script = os.path.join(os.path.dirname(sys.executable), "easgd-migrate")
        assert os.path.exists(script), "install the package: pip install -e '.[test]'"
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        done = subprocess.run(
            [script, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("easgd-migrate: moves TF1 scripts from tf.contrib.opt's")
    assert "--[no]dry_run:" in done.stdout
    assert "--[no]backup:" in done.stdout


@pytest.mark.parametrize("spelling", ["--help", "-h", "-?", "--helpshort", "--helpfull"])
def test_cli_every_help_flag_exits_0(spelling, capsys):
    # In this process: the help flags exit before any flag of easgd-migrate is needed.
    app.define_help_flags()  # As app.run does before it parses the flags.
    with pytest.raises(SystemExit) as caught:
        migrate._parse_flags(["easgd-migrate", spelling])
    assert caught.value.code == 0
    assert "--helpfull" in capsys.readouterr().out  # The help, on stdout.


def test_cli_usage_errors_exit_2(tmp_path, monkeypatch):
    # In this process (a subprocess costs a TensorFlow import): absl's app.run exits with a
    # UsageError's exit code. The real command line exits 0 in test_legacy_example.py.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(app.UsageError, match="at least one PATH") as no_path:
        migrate._main(["easgd-migrate"])
    with pytest.raises(app.UsageError, match="'missing.py' is neither a file") as missing:
        migrate._main(["easgd-migrate", "missing.py"])
    assert no_path.value.exitcode == missing.value.exitcode == migrate.EXIT_ERROR


# --- Keras layers and tf.Variable under the getter ------------------------------------------


@pytest.mark.parametrize(
    "maker",
    [
        "logits = tf.keras.layers.Dense(10)(images)",
        "model = keras.Sequential([keras.layers.Dense(10)])",
        "w = tf.Variable(tf.zeros([784, 10]))",
    ],
)
def test_the_creator_scope_joins_the_getters_scope_where_variables_skip_the_getter(maker):
    source = (
        "import tensorflow as tf\nfrom tensorflow import keras\n\n"
        'getter = tf.contrib.opt.ElasticAverageCustomGetter("/job:worker/task:0")\n'
        'with tf.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):\n'
        f"    {maker}\n"
    )
    migration = codemod.migrate_source(source)
    with_line = (
        'with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter), '
        "getter.variable_creator_scope():"
    )
    assert with_line in migration.code.splitlines()
    [note] = [f for f in migration.findings if "variable_creator_scope" in f.message]
    assert migration.code.splitlines()[note.line - 1] == with_line
    assert codemod.migrate_source(migration.code).code == migration.code


@pytest.mark.parametrize(
    "body",
    [
        # get_variable calls the getter: nothing to add.
        'w = tf.compat.v1.get_variable("w", [784, 10])',
        # Already there.
        "pass",
    ],
)
def test_no_creator_scope_where_every_variable_goes_through_the_getter(body):
    creator = ", getter.variable_creator_scope()" if body == "pass" else ""
    source = (
        "import tensorflow as tf\n\n"
        'getter = tf.contrib.opt.ElasticAverageCustomGetter("")\n'
        f'with tf.compat.v1.variable_scope("", custom_getter=getter){creator}:\n'
        f"    {body}\n" + ("layer = tf.keras.layers.Dense(3)\n" if body == "pass" else "")
    )
    migration = codemod.migrate_source(source)
    assert migration.code.count("variable_creator_scope") == source.count("variable_creator_scope")
    assert not [f for f in migration.findings if "variable_creator_scope" in f.message]
