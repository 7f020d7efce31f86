"""In-process cluster tests: the work ledger's variables
(tf_contrib_easgd/job/ledger_variables.py).

The tests of its other tiers are in tests/unit/test_ledger.py.
"""

import tensorflow as tf

from tf_contrib_easgd.job import ledger_variables

NUM_WORKERS = 2


def _ledger(cluster, index, container):
    """(graph, LedgerVariables, init op) of worker `index`, its state in `container`."""
    graph = tf.Graph()
    with (
        graph.as_default(),
        tf.compat.v1.device(f"/job:worker/task:{index}"),
        tf.compat.v1.container(container),
    ):
        work = ledger_variables.LedgerVariables(NUM_WORKERS, index)
        init = tf.compat.v1.global_variables_initializer()
    return graph, work, init


def test_counts_and_the_end_of_the_job_are_shared_through_ps_0(world, cluster, container):
    del world  # Both variable worlds.
    graphs = [_ledger(cluster, index, container) for index in range(NUM_WORKERS)]
    sessions = [
        tf.compat.v1.Session(cluster.target(index), graph=graphs[index][0])
        for index in range(NUM_WORKERS)
    ]
    (_, chief, init), (_, other, _) = graphs
    with sessions[0] as chief_session, sessions[1] as other_session:
        chief_session.run(init)
        # A new job: every count 0, not done, nobody has acknowledged.
        assert other.all_steps(other_session) == [0, 0]
        assert other.read(other_session) == ([0, 0], False, [False, False])
        chief.record(chief_session, 30)
        other.record(other_session, 20)
        other.record(other_session, 40)  # A count is overwritten, not added to.
        assert chief.all_steps(chief_session) == [30, 40]
        assert (chief.own_steps(chief_session), other.own_steps(other_session)) == (30, 40)
        # What a finished worker polls: the chief's count, the end flag and its own count
        # (lower than its step after a restore), one read.
        assert other.end_state(other_session) == (30, False, 40)
        chief.end_job(chief_session)
        assert other.end_state(other_session) == (30, True, 40)
        assert other.read(other_session) == ([30, 40], True, [False, False])
        other.acknowledge(other_session)
        assert chief.read(chief_session) == ([30, 40], True, [False, True])
        # Once every worker has seen the end, the chief clears it: a checkpoint written
        # later holds a job that a re-run may go on with.
        chief.clear_end(chief_session)
        assert other.read(other_session) == ([30, 40], False, [False, False])


def test_a_checkpoint_holds_the_counts(world, cluster, container, tmp_path):
    del world  # Both variable worlds.
    graph, work, init = _ledger(cluster, 0, container)
    with graph.as_default():
        saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session(cluster.target(0), graph=graph) as session:
        session.run(init)
        work.record(session, 700)
        path = saver.save(session, str(tmp_path / "model.ckpt"))
        work.record(session, 900)
        saver.restore(session, path)
        assert work.all_steps(session) == [700, 0]
    reader = tf.train.load_checkpoint(path)
    names = set(reader.get_variable_to_shape_map())
    assert {"easgd_train/local_steps", "easgd_train/job_done", "easgd_train/acknowledged"} <= names
    assert list(reader.get_tensor("easgd_train/local_steps")) == [700, 0]
