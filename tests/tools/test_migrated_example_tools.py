"""Tests of the migration tools: examples/migrated_tf1, the migrated legacy trainer.

The tests of its other tiers are in tests/e2e/test_migrated_example.py.
"""

import difflib
import subprocess

import legacy_jobs
import pytest

EXAMPLE = legacy_jobs.ROOT / "examples" / "migrated_tf1" / "trainer.py"


LEGACY = legacy_jobs.LEGACY_DIR / "trainer.py"


# The adoption edits, as code lines (comments aside): what the tools' output loses, and
# what the example adds.
REMOVED = [
    "server.join()",
    "hooks=[easgd_hook],",
    "step = 0",
    "while not sess.should_stop() and step < FLAGS.train_steps:",
    "step += 1",
]


ADDED = [
    "tf_contrib_easgd.serve_until_done(server)",
    'tf.compat.v1.summary.scalar("elastic_distance", ea_custom.elastic_distance())',
    "ledger = tf_contrib_easgd.WorkLedger(",
    "cluster, is_chief, FLAGS.task_index, FLAGS.train_steps, FLAGS.communication_period",
    ")",
    "hooks=[easgd_hook, ledger.hook],",
    "step = ledger.step",
    "while not sess.should_stop() and not ledger.finish(sess):",
    "step = ledger.count(sess)",
    "ledger.stop_parameter_servers(server.target)",
]


def _formatted(source, tmp_path):
    """`source` as ruff formats it and sorts its imports, from its first import on."""
    path = tmp_path / "formatted.py"
    path.write_text(source)
    ruff = str(legacy_jobs.BIN / "ruff")
    for args in (["check", "--select", "I", "--fix", "--quiet"], ["format", "--quiet"]):
        subprocess.run([ruff, *args, str(path)], check=True, timeout=60)
    lines = path.read_text().splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("from __future__")) :]


def _code(lines):
    """Stripped lines without comments (whole-line or trailing) and blank lines."""
    code = [line.split("  # ")[0].strip() for line in lines]
    return [line for line in code if line and not line.startswith("#")]


@pytest.mark.subprocess
def test_the_example_is_the_tools_output_plus_the_adoption_edits(tmp_path):
    migrated = legacy_jobs.migrate_source(
        legacy_jobs.upgrade_v2_source(LEGACY.read_text(), tmp_path)
    )
    diff = list(
        difflib.ndiff(_formatted(migrated, tmp_path), _formatted(EXAMPLE.read_text(), tmp_path))
    )
    removed = _code(line[2:] for line in diff if line.startswith("- "))
    added = _code(line[2:] for line in diff if line.startswith("+ "))
    assert removed == REMOVED
    assert added == ADDED
