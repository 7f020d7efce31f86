"""`WorkLedger` (tf_contrib_easgd/job/ledger.py) in a user's own loop, on in-process servers.

The loop is the migrated example's (examples/migrated_tf1/trainer.py): a
`MonitoredTrainingSession` with the ledger's hook, `count` after each step, `finish` in the
loop's condition. A parameter server restored from a checkpoint sends a finished worker
back to the count the checkpoint holds; the chief ends the job once every count is
complete. easgd-train's jobs on the same ledger, with real processes killed and restarted:
tests/e2e/test_faults.py.
"""

import pytest
import tensorflow as tf

import tf_contrib_easgd


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((True, 0, 10, 5), None, None),  # Accepted.
        ((1, 0, 10, 5), TypeError, "is_chief must be a bool, got 1"),
        ((False, 2, 10, 5), ValueError, "task_index must be below the 2 task(s)"),
        ((False, -1, 10, 5), ValueError, "task_index must be at least 0, got -1"),
        ((True, 0, 0, 5), ValueError, "train_steps must be at least 1, got 0"),
        ((True, 0, 10.0, 5), TypeError, "train_steps must be an int, got 10.0"),
        ((True, 0, 10, True), TypeError, "communication_period must be an int, got True"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_built(args, error, message):
    cluster = {"ps": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}
    graph = tf.Graph()
    with graph.as_default():
        if error is None:
            ledger = tf_contrib_easgd.WorkLedger(cluster, *args)
            assert (ledger.is_chief, ledger.others, ledger.train_steps) == (True, [1], 10)
            return
        with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
            tf_contrib_easgd.WorkLedger(cluster, *args)
    assert graph.get_operations() == []


@pytest.mark.parametrize(
    ("cluster", "is_chief", "task_index", "others"),
    [
        # Worker 0 is the chief: the ledger's slots are the workers' task indices.
        ({"ps": ["a:1"], "worker": ["b:1", "c:1", "d:1"]}, True, 0, [1, 2]),
        ({"ps": ["a:1"], "worker": ["b:1", "c:1", "d:1"]}, False, 2, [0, 1]),
        # A "chief" job: the chief takes slot 0, worker i slot 1 + i.
        ({"ps": ["a:1"], "chief": ["b:1"], "worker": ["c:1", "d:1"]}, True, 0, [1, 2]),
        ({"ps": ["a:1"], "chief": ["b:1"], "worker": ["c:1", "d:1"]}, False, 1, [0, 1]),
    ],
)
def test_the_ledger_has_a_slot_per_worker(cluster, is_chief, task_index, others):
    with tf.Graph().as_default():
        ledger = tf_contrib_easgd.WorkLedger(cluster, is_chief, task_index, 10, 5)
    assert ledger.others == others
    assert ledger.variables.local_steps.shape.as_list() == [3]
