"""easgd-migrate on whole trees: star imports, helper modules, tf.keras, tf-slim, reports.

Each case writes a small multi-file project and runs the tool's `run` on its folder, as
`easgd-migrate DIR` does, or migrates one source; none imports TensorFlow but the last,
which checks in a fresh interpreter the tf-slim workaround the tool's note gives.
"""

import io
import re
import textwrap

import pytest
from processes import run_python_script

from tf_contrib_easgd.migrate import (
    cli,
    codemod,
    project,
    slim_apis,
    star_imports,
    versions,
)

EASGD_SCRIPT = """\
from common import *


def main(_):
    getter = tf.contrib.opt.ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.device(tf.compat.v1.train.replica_device_setter(cluster=CLUSTER)):
        opt = tf.contrib.opt.ElasticAverageOptimizer(SGD, 2, getter, rho=0.0, moving_rate=0.1)


if __name__ == "__main__":
    tf.compat.v1.app.run()
"""


def _tree(tmp_path, files):
    """Writes `files` (relative path -> dedented source) under `tmp_path`."""
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


def _run(*paths):
    """Runs the tool on `paths` without backups; returns (status, report)."""
    err = io.StringIO()
    status = cli.run(list(paths), backup=False, out=io.StringIO(), err=err)
    return status, err.getvalue()


# --- Star imports --------------------------------------------------------------------------


def test_names_of_a_star_import_from_the_tree_are_imported_and_converted(tmp_path):
    _tree(
        tmp_path,
        {
            "base.py": "import tensorflow as tf\nimport numpy as _np\n",
            "common.py": "from base import *\nimport os\nCLUSTER = None\n",
            "train.py": EASGD_SCRIPT,
        },
    )
    status, report = _run(tmp_path)
    train = (tmp_path / "train.py").read_text()
    # `tf` comes from base.py through common.py's own star import; `os` is not used.
    assert train.startswith(
        "from common import *\n"
        "# Bound by `from common import *` too; easgd-migrate imports them by name to convert "
        "their uses.\nimport tensorflow as tf\nimport tf_contrib_easgd\n"
    )
    assert "tf_contrib_easgd.ElasticAverageOptimizer(SGD" in train
    assert "with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(" in train
    assert status == cli.EXIT_OK, report
    assert "3 file(s) checked, 1 changed, 0 use(s) not converted, 0 file(s) not" in report
    assert _run(tmp_path)[1].count("1 changed") == 0  # A second run changes nothing.


def test_all_and_private_names_limit_what_a_star_import_binds(tmp_path):
    _tree(
        tmp_path,
        {
            "common.py": "import numpy as np\nimport tensorflow as tf\n__all__ = ['tf']\n",
            "train.py": EASGD_SCRIPT.replace("(SGD,", "(np.sgd(), _np,"),
        },
    )
    status, report = _run(tmp_path)
    train = (tmp_path / "train.py").read_text()
    # Only `tf` is exported: `np` is not imported, nor the private `_np`.
    assert "import tensorflow as tf\n" in train
    assert "import numpy" not in train
    assert status == cli.EXIT_OK, report


def test_a_star_import_from_outside_the_tree_is_reported(tmp_path):
    _tree(tmp_path, {"train.py": EASGD_SCRIPT})
    status, report = _run(tmp_path / "train.py")
    assert status == cli.EXIT_UNCONVERTED
    assert (
        "train.py:1: not converted: `from common import *` comes from outside the files "
        "migrated, so easgd-migrate cannot see what it binds: CLUSTER, SGD, tf are read here"
    ) in report
    # The star import; the contrib uses behind `tf` cannot be seen, nor counted.
    assert "1 file(s) checked, 0 changed, 1 use(s) not converted, 0 file(s) not" in report


def test_names_bound_only_for_the_tools_eyes_are_not_written(tmp_path):
    _tree(
        tmp_path,
        {
            "common.py": "import tensorflow as tf\n",
            "shapes.py": "from common import *\n\n\ndef zeros():\n    return tf.zeros([2])\n",
        },
    )
    status, report = _run(tmp_path)
    assert status == cli.EXIT_OK
    assert "2 file(s) checked, 0 changed" in report
    assert (tmp_path / "shapes.py").read_text().startswith("from common import *\n\n\n")


def test_reading_a_tree_analyses_each_module_once(tmp_path, monkeypatch):
    # Scope analysis is what makes a tree slow (research/slim: 95 modules). Reading the tree
    # wraps each version of a module once for its star imports, facts and Keras uses, and
    # looks for free names only in a module with a star import.
    _tree(
        tmp_path,
        {
            "common.py": "import tensorflow as tf\nCLUSTER = SGD = None\n",
            "train.py": EASGD_SCRIPT.replace("import *", "import *\nimport model"),
            "model.py": """\
                import tensorflow as tf


                def dense(x):
                    return tf.keras.layers.Dense(4)(x)
            """,
        },
    )
    wrapped = []

    class Counting(versions.MetadataWrapper):
        def __init__(self, module, *args, **kwargs):
            wrapped.append(module.code.splitlines()[0])
            super().__init__(module, *args, **kwargs)

    monkeypatch.setattr(versions, "MetadataWrapper", Counting)
    searched = []
    real_free_names = star_imports.free_names

    def recording_free_names(module):
        searched.append(module.code.splitlines()[0])
        return real_free_names(module)

    monkeypatch.setattr(star_imports, "free_names", recording_free_names)
    files = sorted(tmp_path.glob("*.py"))
    found = project.contexts(files, [tmp_path])
    # One wrapper a module version: common.py's serves what its star import exports and its
    # facts; train.py has two versions, the one its free names are looked up in and the one
    # with the star import's names written out, whose facts and Keras uses are read.
    assert sorted(wrapped) == sorted(
        ["import tensorflow as tf", "import tensorflow as tf"]
        + ["from common import *", "from common import *"]
    )
    assert searched == ["from common import *"]  # train.py only.
    # The results are those of separate analyses: model.py builds graph ops for train.py,
    # which uses EASGD, so its tf.keras needs Keras 2 and train.py sets the switch.
    assert found[tmp_path / "model.py"].keras2_script == str(tmp_path / "train.py")
    assert found[tmp_path / "train.py"].keras2_import == (f"{tmp_path / 'model.py'} (tf.keras)")
    assert found[tmp_path / "common.py"].keras2_script == ""


# --- Helper modules of a script that uses EASGD --------------------------------------------

HELPER = """\
import tensorflow as tf


def preprocess(images, method):
    tf.summary.image("raw", images)
    return tf.image.resize(images, [16, 16], method=method)
"""


@pytest.mark.parametrize("imported", [True, False])
def test_a_helper_of_an_easgd_script_gets_tf1_summaries(tmp_path, imported):
    script = EASGD_SCRIPT.replace("from common import *", "import tensorflow as tf\nCLUSTER=1")
    if imported:
        script = "import preprocessing\n" + script
    _tree(tmp_path, {"preprocessing.py": HELPER, "train.py": script})
    status, report = _run(tmp_path)
    helper = (tmp_path / "preprocessing.py").read_text()
    if imported:
        # Graph code for train.py: TF1's summary, and TF1's resize, which takes TF1's
        # integer methods as well as the names.
        assert 'tf.compat.v1.summary.image("raw", images)' in helper
        assert "tf.compat.v1.image.resize(images, [16, 16], method=method)" in helper
    else:
        assert helper == HELPER
        assert "preprocessing.py:6: note: `tf.image.resize(images, [16, 16], method=me" in report
    assert status == cli.EXIT_OK, report


# --- tf.keras in TF1 graph code -------------------------------------------------------------

REGULARIZED = """\
import tensorflow as tf


def model(x):
    w = tf.compat.v1.get_variable("w", [4, 2], regularizer=tf.keras.regularizers.l2(0.5))
    return tf.matmul(x, w)
"""


def test_tf_keras_in_graph_code_switches_the_script_that_imports_it(tmp_path):
    script = "import model\n" + EASGD_SCRIPT.replace(
        "from common import *", "import tensorflow as tf\nCLUSTER = 1"
    )
    _tree(tmp_path, {"model.py": REGULARIZED, "train.py": script})
    status, report = _run(tmp_path)
    train = (tmp_path / "train.py").read_text()
    assert train.startswith("import os\n\n# tf.compat.v1 layers need Keras 2 (tf-keras), set")
    assert 'os.environ["TF_USE_LEGACY_KERAS"] = "1"\n\nimport model\n' in train
    assert f"train.py:4: note: imports {tmp_path / 'model.py'} (tf.keras), which need" in report
    assert (
        "model.py:5: note: uses tf.keras, which needs Keras 2 on TensorFlow 2.16 and later: "
        f"{tmp_path / 'train.py'}, which imports this module, sets" in report
    )
    assert status == cli.EXIT_OK, report
    assert "0 changed" in _run(tmp_path)[1]


@pytest.mark.parametrize(
    ("source", "switched", "unconverted"),
    [
        # A graph script: the switch.
        (REGULARIZED + "\nif __name__ == '__main__':\n    model(None)\n", True, False),
        # Keras 3 beside it: not switched, listed.
        (
            "import keras\n"
            + REGULARIZED
            + "\nif __name__ == '__main__':\n    keras.Sequential()\n",
            False,
            True,
        ),
        # Not graph code, or values the same in both Keras: nothing.
        (
            "import tensorflow as tf\n\nif __name__ == '__main__':\n    tf.keras.Sequential()\n",
            False,
            False,
        ),
        (
            "import tensorflow as tf\n\nif __name__ == '__main__':\n"
            "    tf.compat.v1.Session(), tf.keras.losses.Reduction.SUM\n",
            False,
            False,
        ),
    ],
)
def test_tf_keras_needs_keras_2_only_in_graph_code(source, switched, unconverted):
    migration = codemod.migrate_source(source)
    assert ("TF_USE_LEGACY_KERAS" in migration.code) == switched
    assert any(f.unconverted for f in migration.findings) == unconverted


# --- tf.contrib.slim -> tf-slim -------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("slim = tf.contrib.slim", "import tf_slim as slim"),
        ("import tensorflow.contrib.slim as slim", "import tf_slim as slim"),
        ("from tensorflow.contrib import slim", "import tf_slim as slim"),
        ("from tensorflow.contrib import slim as sl", "import tf_slim as sl"),
        ("from tensorflow.contrib.slim.nets import vgg", "from tf_slim.nets import vgg"),
        ("from tensorflow.contrib.slim import arg_scope", "from tf_slim import arg_scope"),
        ("from tensorflow.contrib.framework import arg_scope", "from tf_slim import arg_scope"),
    ],
)
def test_slim_becomes_tf_slim(before, after):
    source = f"import tensorflow as tf\n{before}  # slim\n\n\ndef f():\n    return 1\n"
    migration = codemod.migrate_source(source)
    assert migration.code == source.replace(before, after)
    assert [f.message for f in migration.findings] == [slim_apis.MOVED_NOTE]
    assert codemod.migrate_source(migration.code).code == migration.code


def test_slim_chains_move_and_contribs_internals_stay():
    source = (
        "import tensorflow as tf\n\n\ndef f(x):\n"
        "    with tf.contrib.framework.arg_scope([tf.contrib.slim.conv2d]):\n"
        "        return tf.contrib.slim.python.slim.learning.train_step(x)\n"
    )
    migration = codemod.migrate_source(source)
    assert migration.code == (
        "import tensorflow as tf\nimport tf_slim\n\n\ndef f(x):\n"
        "    with tf_slim.arg_scope([tf_slim.conv2d]):\n"
        "        return tf.contrib.slim.python.slim.learning.train_step(x)\n"
    )
    # The first note: a library module, which builds graphs in functions only.
    [_, moved, internal] = migration.findings
    assert moved.message == slim_apis.MOVED_NOTE and not moved.unconverted
    assert internal.line == 7 and internal.unconverted and "tf_slim.X there" in internal.message


def test_batch_norm_of_tf_slim_gets_the_workaround_note():
    source = (
        "import tensorflow.contrib.slim as slim\n\n\ndef f(x):\n    return slim.batch_norm(x)\n"
    )
    migration = codemod.migrate_source(source)
    assert [(f.line, f.message) for f in migration.findings if "batch_norm" in f.message] == [
        (5, slim_apis.BATCH_NORM_NOTE)
    ]


# --- Supervisor-style trainers and global_step ----------------------------------------------

SLIM_TRAINER = """import tensorflow as tf
import tensorflow.contrib.slim as slim


def main(_):
    getter = tf.contrib.opt.ElasticAverageCustomGetter("/job:worker/task:0")
    global_step = tf.compat.v1.train.get_or_create_global_step()
    rate = tf.compat.v1.train.exponential_decay(0.1, global_step, 100, 0.5)
    opt = tf.contrib.opt.ElasticAverageOptimizer(SGD(rate), 2, getter, rho=0.0, moving_rate=0.1)
    slim.learning.train(TRAIN_OP, "/tmp/x", number_of_steps=40)
    while sess.run(global_step) < 40:
        pass
"""


def test_slim_learning_train_and_global_step_reads_are_noted():
    migration = codemod.migrate_source(SLIM_TRAINER)
    notes = {f.line: f.message for f in migration.findings}
    assert not [f for f in migration.findings if f.unconverted]
    assert notes[11].startswith("`slim.learning.train` trains under a tf.train.Supervisor")
    assert "local_init_op = opt.get_init_op(TASK_INDEX)" in notes[11]
    # The decay (line 9), the stop at number_of_steps (11) and the loop's condition (12).
    assert notes[9].startswith(
        "reads global_step for a learning-rate decay and a stop condition (lines 9, 11, 12)."
    )


def test_global_step_reads_of_a_module_without_easgd_are_not_noted():
    source = SLIM_TRAINER.replace("tf.contrib.opt.ElasticAverage", "Other")
    assert not [f for f in codemod.migrate_source(source).findings if "global_step" in f.message]


# --- tf_upgrade_v2's tf.image calls ----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "converted", "noted"),
    [
        (
            "tf.image.draw_bounding_boxes(x, b)",
            "tf.compat.v1.image.draw_bounding_boxes(x, b)",
            False,
        ),
        (
            "tf.image.draw_bounding_boxes(x, b, name='n')",
            "tf.compat.v1.image.draw_bounding_boxes(x, b, name='n')",
            False,
        ),
        ("tf.image.draw_bounding_boxes(x, b, 'n')", None, True),
        ("tf.image.draw_bounding_boxes(x, b, colors=c)", None, False),
        (
            "tf.image.resize(x, [4, 4], method=0)",
            "tf.compat.v1.image.resize(x, [4, 4], method=0)",
            False,
        ),
        ("tf.image.resize(x, [4, 4], 2)", "tf.compat.v1.image.resize(x, [4, 4], 2)", False),
        ("tf.image.resize(x, [4, 4], method=tf.image.ResizeMethod.AREA)", None, False),
        ("tf.image.resize(x, [4, 4], method='area')", None, False),
        ("tf.image.resize(x, [4, 4], method=0, antialias=True)", None, False),
        ("tf.image.resize(x, [4, 4])", None, False),
        ("tf.image.resize(x, [4, 4], method=m)", None, True),  # Not graph code: noted.
    ],
)
def test_image_calls_tf_upgrade_v2_leaves_failing(call, converted, noted):
    source = f"import tensorflow as tf\n\n\ndef f(x, b, c, m):\n    return {call}\n"
    migration = codemod.migrate_source(source)
    assert migration.code == source.replace(call, converted or call)
    assert bool(migration.findings) == noted
    assert not [f for f in migration.findings if f.unconverted]


# --- Reports ---------------------------------------------------------------------------------


def test_the_summary_counts_files_that_could_not_be_migrated(tmp_path):
    _tree(
        tmp_path,
        {
            "old.py": "print 'python 2'\n",
            "empty.py": "",
            "train.py": "import tensorflow as tf\nx = tf.contrib.image.rotate(1, 2)\n",
        },
    )
    status, report = _run(tmp_path)
    assert status == cli.EXIT_ERROR
    assert report.endswith(
        "easgd-migrate: 3 file(s) checked, 0 changed, 1 use(s) not converted, "
        "2 file(s) not migrated at all.\n"
    )


# --- What tf-slim 1.1.0 needs on this TensorFlow ---------------------------------------------

SLIM_WORKAROUND = """\
import importlib
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
import tf_slim as slim
from tensorflow.python.ops import control_flow_ops

tf.compat.v1.disable_v2_behavior()
x = tf.compat.v1.placeholder(tf.float32, [None, 4, 4, 1])
try:
    slim.batch_norm(x)
    print("batch_norm built without the workaround")
except ModuleNotFoundError as error:
    print("without the workaround:", error)
# The workaround of slim_apis.BATCH_NORM_NOTE, as it says.
for name in ('legacy_tf_layers', 'legacy_tf_layers.normalization'):
    sys.modules.setdefault('tf_keras.' + name, importlib.import_module('tf_keras.src.' + name))
control_flow_ops.cond = tf.compat.v1.cond
training = tf.compat.v1.placeholder_with_default(True, [])
with slim.arg_scope([slim.conv2d], weights_regularizer=tf.keras.regularizers.l2(0.1)):
    conv = slim.conv2d(x, 2, [3, 3])
y = slim.batch_norm(conv, is_training=training, scope="bn")
updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
with tf.compat.v1.Session() as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    feed = {x: [[[[1.0]] * 4] * 4]}
    batch_mean = sess.run(tf.reduce_mean(conv, [0, 1, 2]), feed)
    sess.run(updates, feed)
    print("batch mean", batch_mean.tolist(), "moving mean", sess.run("bn/moving_mean:0").tolist())
"""


@pytest.mark.subprocess
def test_tf_slim_batch_norm_fails_without_the_noted_workaround_and_trains_with_it(tmp_path):
    pytest.importorskip("tf_slim", reason="tf-slim comes with the legacy-keras extra")
    for line in (
        "sys.modules.setdefault('tf_keras.' + name, importlib.import_module('tf_keras.src.' + "
        "name))",
        "control_flow_ops.cond = tf.compat.v1.cond",
    ):
        assert line in slim_apis.BATCH_NORM_NOTE and line in SLIM_WORKAROUND
    out = run_python_script(SLIM_WORKAROUND, tmp_path).stdout
    assert "without the workaround: No module named 'tf_keras.legacy_tf_layers'" in out, out
    # One update of the moving mean at batch_norm's default decay 0.999, from 0 towards the
    # batch mean m of the conv output: 0.999 * 0 + 0.001 * m per channel.
    found = re.search(r"batch mean \[(.*)\] moving mean \[(.*)\]", out)
    assert found, out
    batch_mean, moving_mean = ([float(v) for v in group.split(",")] for group in found.groups())
    assert moving_mean == pytest.approx([0.001 * m for m in batch_mean], rel=1e-4, abs=1e-9)


def test_a_star_import_of_a_local_contrib_copy_beside_another_is_reported_not_bound():
    # The copy's star import is reported as such; the other one from outside the tree is
    # reported too, and neither is bound (there is no tree here to bind from).
    source = (
        "from common import *\n"
        "from my_pkg.elastic_average_optimizer import *\n"
        "\n"
        "getter = ElasticAverageCustomGetter('/job:worker/task:0')\n"
    )
    migration = codemod.migrate_source(source)
    notes = {f.line: f.message for f in migration.findings}
    assert notes[1].startswith("`from common import *` comes from outside the files migrated")
    assert notes[2].startswith("`from my_pkg.elastic_average_optimizer import *` takes EASGD")


def test_a_comparison_with_a_limit_named_like_a_global_step_is_no_read_of_it():
    # `max_global_steps` is a limit, `local_step` the worker's own count: no global_step read.
    source = SLIM_TRAINER.replace(
        "while sess.run(global_step) < 40:", "while s < max_global_steps:"
    )
    notes = {f.line: f.message for f in codemod.migrate_source(source).findings}
    assert notes[9].startswith(
        "reads global_step for a learning-rate decay and a stop condition (lines 9, 11)."
    )
