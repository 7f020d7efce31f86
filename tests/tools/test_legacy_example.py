"""examples/legacy_tf1: a 2018 TF1 EASGD trainer runs on TF 2 after two tools, no hand edits.

The order documented in docs/MIGRATING.md is `tf_upgrade_v2` first, then `easgd-migrate`;
the other order gives the same text (tested below). The end-to-end test converts a copy with
`tf_upgrade_v2`'s converter (in the test's process, as its console script runs it) and the
`easgd-migrate` console script, and then runs the result as a real job: one ps and two
workers, separate OS processes on free loopback ports.
"""

import legacy_jobs
import pytest
import tensorflow as tf

EXAMPLE = legacy_jobs.LEGACY_DIR / "trainer.py"


def test_tf_upgrade_v2_alone_leaves_the_script_broken(tmp_path):
    upgraded = legacy_jobs.upgrade_v2_source(EXAMPLE.read_text(), tmp_path)
    assert "tf.contrib.opt.ElasticAverageOptimizer(" in upgraded  # TF 2 has no tf.contrib,
    assert "with tf.device(device_setter)" in upgraded  # tf.device refuses functions,
    assert "disable_v2_behavior" not in upgraded  # and placeholders need graph mode.
    with pytest.raises(RuntimeError, match="does not support functions"):
        tf.device(lambda op: "/cpu:0")


def test_both_orders_give_the_same_script(tmp_path):
    source = EXAMPLE.read_text()
    upgrade_first = legacy_jobs.migrate_source(legacy_jobs.upgrade_v2_source(source, tmp_path))
    migrate_first = legacy_jobs.upgrade_v2_source(legacy_jobs.migrate_source(source), tmp_path)
    assert upgrade_first == migrate_first
    # Idempotent on the final text:
    assert legacy_jobs.migrate_source(upgrade_first) == upgrade_first
    assert "tf.contrib.opt" not in upgrade_first
    assert upgrade_first.count("tf.compat.v1.disable_v2_behavior()") == 1
    assert "with tf.compat.v1.device(device_setter)" in upgrade_first
    compile(upgrade_first, str(EXAMPLE), "exec")
