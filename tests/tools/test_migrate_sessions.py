"""easgd-migrate on TensorFlow's training sessions in modules that use EASGD.

`MonitoredTrainingSession` becomes this package's (same arguments) unless `--keep_tf_session`;
each use of it and of `Supervisor` is noted with what it does to the centre. The line numbers
of every note are those of the migrated text (`line_map`).
"""

import io
import textwrap

import pytest

from tf_contrib_easgd.migrate import cli as migrate
from tf_contrib_easgd.migrate import codemod
from tf_contrib_easgd.migrate.line_map import line_mapper

# Both of contrib's defaults given, so no note on their cost (test_migrate.py has those).
EASGD = "opt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2, getter, 10, 0.45, 0.0)\n"


def _migrate(source, **kwargs):
    """Migrates dedented `source`; checks that a second run changes nothing."""
    migration = codemod.migrate_source(textwrap.dedent(source), **kwargs)
    assert codemod.migrate_source(migration.code, **kwargs).code == migration.code
    return migration


@pytest.mark.parametrize(
    ("imports", "spelled"),
    [
        ("import tensorflow as tf", "tf.train.MonitoredTrainingSession"),  # TF1, unconverted.
        ("import tensorflow as tf", "tf.compat.v1.train.MonitoredTrainingSession"),
        ("import tensorflow.compat.v1 as tf", "tf.train.MonitoredTrainingSession"),
        (
            "import tensorflow as tf\nfrom tensorflow.compat.v1 import train",
            "train.MonitoredTrainingSession",
        ),
        (
            "import tensorflow as tf\nfrom tensorflow.python.training import monitored_session",
            "monitored_session.MonitoredTrainingSession",
        ),
    ],
)
def test_monitored_training_session_becomes_ours_in_every_spelling(imports, spelled):
    migration = _migrate(
        f"{imports}\n\n{EASGD}with {spelled}(master=target, is_chief=True, hooks=[h]) as s:\n"
        "    pass\n"
    )
    assert (
        "with tf_contrib_easgd.MonitoredTrainingSession(master=target, is_chief=True, hooks=[h])"
        in migration.code
    )
    [note] = [f for f in migration.findings if "MonitoredTrainingSession" in f.message]
    line = migration.code.splitlines()[note.line - 1]
    assert line.startswith("with tf_contrib_easgd.MonitoredTrainingSession(")
    assert not note.unconverted
    assert note.message.startswith(f"`{spelled}` became tf_contrib_easgd.MonitoredTrainingSession")
    assert "restore its latest checkpoint over the centre" in note.message
    assert "--keep_tf_session" in note.message


def test_an_import_by_name_is_split_and_the_uses_stay():
    migration = _migrate(
        """\
        import tensorflow as tf
        from tensorflow.compat.v1.train import MonitoredTrainingSession, StopAtStepHook

        getter = tf.contrib.opt.ElasticAverageCustomGetter("")
        with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=5)]) as sess:
            pass
        """
    )
    assert migration.code.startswith(
        "import tensorflow as tf\n"
        "from tensorflow.compat.v1.train import StopAtStepHook\n"
        "from tf_contrib_easgd import MonitoredTrainingSession\n"
        "import tf_contrib_easgd\n"
    )
    assert "with MonitoredTrainingSession(hooks=[StopAtStepHook(last_step=5)]) as sess:" in (
        migration.code
    )
    # The other finding: StopAtStepHook's last_step counts exchanges (global_steps).
    [note] = [f for f in migration.findings if "global_step" not in f.message]
    assert note.message.startswith(
        "`from tensorflow.compat.v1.train import MonitoredTrainingSession` became"
    )


def test_files_without_easgd_keep_tensorflows_session():
    source = (
        "import tensorflow as tf\n\n\ndef train():\n"
        "    with tf.compat.v1.train.MonitoredTrainingSession() as sess:\n"
        "        sess.run(tf.compat.v1.train.Supervisor)\n"
    )
    assert codemod.migrate_source(source) == codemod.Migration(code=source, findings=())


def test_keep_tf_session_leaves_it_without_a_note():
    source = (
        "import tensorflow as tf\nimport tf_contrib_easgd\n\n\ndef train(opt):\n"
        "    assert isinstance(opt, tf_contrib_easgd.ElasticAverageOptimizer)\n"
        "    return tf.compat.v1.train.MonitoredTrainingSession()\n"
    )
    kept = codemod.migrate_source(source, keep_tf_session=True)
    assert kept == codemod.Migration(code=source, findings=())
    moved = codemod.migrate_source(source)
    assert "    return tf_contrib_easgd.MonitoredTrainingSession()\n" in moved.code


@pytest.mark.parametrize(
    ("imports", "use"),
    [
        ("import tensorflow as tf", "tf.train.Supervisor"),
        ("import tensorflow as tf", "tf.compat.v1.train.Supervisor"),
        (
            "import tensorflow as tf\nfrom tensorflow.compat.v1.train import Supervisor",
            "Supervisor",
        ),
    ],
)
def test_a_supervisor_is_noted_with_its_replacement(imports, use):
    migration = _migrate(
        f"{imports}\n\n{EASGD}sv = {use}(is_chief=True, logdir='/tmp/train')\n"
        "sess = sv.prepare_or_wait_for_session(server.target)\n"
    )
    assert f"sv = {use}(is_chief=True" in migration.code  # It stays: it still runs.
    [note] = migration.findings
    assert not note.unconverted
    assert migration.code.splitlines()[note.line - 1].startswith("sv = ")
    assert note.message.startswith(f"`{use}`: a chief's Supervisor restores the latest")
    assert "re-initialising the centre" in note.message
    assert "tf_contrib_easgd.MonitoredTrainingSession(master=server.target" in note.message
    assert "hooks=[opt.make_session_run_hook(IS_CHIEF, TASK_INDEX)]" in note.message


def _run(path, **kwargs):
    out, err = io.StringIO(), io.StringIO()
    status = migrate.run([str(path)], out=out, err=err, **kwargs)
    return status, err.getvalue()


def test_the_command_line_flag_keeps_tensorflows_session(tmp_path):
    script = tmp_path / "train.py"
    source = (
        f"import tensorflow as tf\n\n{EASGD}s = tf.compat.v1.train.MonitoredTrainingSession()\n"
    )
    script.write_text(source)
    status, err = _run(script, keep_tf_session=True, backup=False)
    assert status == migrate.EXIT_OK, err
    assert "s = tf.compat.v1.train.MonitoredTrainingSession()\n" in script.read_text()
    assert "MonitoredTrainingSession` became" not in err
    status, err = _run(script, backup=False)
    assert status == migrate.EXIT_OK, err
    assert "s = tf_contrib_easgd.MonitoredTrainingSession()\n" in script.read_text()
    assert f"{script}:7: note: `tf.compat.v1.train.MonitoredTrainingSession` became" in err


def test_cli_defines_the_flag(monkeypatch):
    monkeypatch.setattr(migrate.sys, "argv", ["easgd-migrate"])
    migrate._define_flags()
    assert migrate.flags.FLAGS["keep_tf_session"].default is False


# --- Lines of the migrated text ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # A changed line among inserted ones maps to its own replacement, not by offset.
        ("a\nx = 1\nwith s(1):\nb\n", "a\nNEW\n\nx = 1\nwith t(1):\nb\n", [1, 4, 5, 6]),
        # A removed line maps to the line after it; unchanged lines to themselves.
        ("a\nremoved\nb\n", "a\nb\n", [1, 2, 2]),
        # A line split in two maps to the part most like it.
        ("from m import A, B\nc\n", "from m import B\nfrom n import A\nc\n", [1, 3]),
    ],
)
def test_line_mapper(old, new, expected):
    to_new = line_mapper(old, new)
    assert [to_new(line) for line in range(1, len(old.splitlines()) + 1)] == expected
