"""In-process cluster tests: `WorkLedger` (tf_contrib_easgd/job/ledger.py) in a user's own
loop.

The tests of its other tiers are in tests/unit/test_work_ledger.py.
"""

import threading
import time

import tensorflow as tf
from clusters import worker_scope

import tf_contrib_easgd

TRAIN_STEPS, PERIOD, NUM_WORKERS = 12, 4, 2


# Worker 1 pauses before its local step 5: the test saves a checkpoint there, whose ledger
# holds its count 4 (written at its first exchange).
SAVED_AT = 4


DEADLINE_SECS = 60


def _worker(cluster, index, container):
    """Worker `index`'s graph as a TF1 script builds it: one variable w, loss w^2 / 2 under
    SGD at 0.5, EASGD every PERIOD steps, the ledger, a Saver of the global variables."""
    graph = tf.Graph()
    getter = tf_contrib_easgd.ElasticAverageCustomGetter(f"/job:worker/task:{index}")
    with graph.as_default(), worker_scope(cluster.spec, index, getter, container):
        w = tf.compat.v1.get_variable("w", initializer=tf.constant(1.0))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = tf_contrib_easgd.ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5),
            num_worker=NUM_WORKERS,
            ea_custom_getter=getter,
            communication_period=PERIOD,
            rho=0.0,
        )
        train_op = opt.minimize(0.5 * tf.square(w), global_step=global_step)
        ledger = tf_contrib_easgd.WorkLedger(cluster.spec, index == 0, index, TRAIN_STEPS, PERIOD)
        saver = tf.compat.v1.train.Saver()
    hook = opt.make_session_run_hook(index == 0, index)
    return graph, train_op, global_step, ledger, saver, hook


def _session(cluster, index, graph, hooks):
    """The migrated example's session: the library's `MonitoredTrainingSession`."""
    with graph.as_default():
        return tf_contrib_easgd.MonitoredTrainingSession(
            master=cluster.target(index),
            is_chief=index == 0,
            hooks=hooks,
            config=cluster.session_config(index),
            max_wait_secs=DEADLINE_SECS,
            log_step_count_steps=None,
            save_summaries_steps=None,
        )


def _train(sess, ledger, train_op, counts):
    """The user's loop; `counts` gets the ledger's step after each local step."""
    while not sess.should_stop() and not ledger.finish(sess, DEADLINE_SECS):
        sess.run(train_op)
        counts.append(ledger.count(sess))


class _PauseBefore(tf.compat.v1.train.SessionRunHook):
    """Holds the run after `runs` runs until `go` is set; sets `reached` then."""

    def __init__(self, runs):
        self._left = runs
        self.reached, self.go = threading.Event(), threading.Event()

    def before_run(self, run_context):
        del run_context  # Unused.
        if self._left == 0:
            self.reached.set()
            assert self.go.wait(DEADLINE_SECS)
        self._left -= 1


def _until(condition, what):
    deadline = time.monotonic() + DEADLINE_SECS
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.05)


def test_a_restored_ps_sends_a_users_loop_back_to_its_count(world, cluster, container, tmp_path):
    del world  # Both variable worlds.
    chief_graph, chief_train, global_step, chief_ledger, saver, chief_hook = _worker(
        cluster, 0, container
    )
    graph1, train1, _, ledger1, _, hook1 = _worker(cluster, 1, container)
    pause = _PauseBefore(SAVED_AT)
    chief_counts, counts1, errors = [], [], []

    def worker1():
        try:
            with _session(cluster, 1, graph1, [hook1, ledger1.hook, pause]) as sess:
                _train(sess, ledger1, train1, counts1)
        except Exception as error:  # Reported by the assertion below.
            errors.append(error)

    # The test's own session on the chief's graph saves and restores the ps's variables.
    with (
        _session(cluster, 0, chief_graph, [chief_hook, chief_ledger.hook]) as chief,
        cluster.session(0, chief_graph) as outside,
    ):
        thread = threading.Thread(target=worker1, daemon=True)
        thread.start()
        assert pause.reached.wait(DEADLINE_SECS)
        # Worker 1 has taken 4 steps and exchanged once: global_step 1, counts [0, 4].
        path = saver.save(outside, str(tmp_path / "model.ckpt"))
        assert chief_ledger.variables.all_steps(outside) == [0, SAVED_AT]
        pause.go.set()
        # Worker 1 trains to 12 and waits for the chief; the ps is restored from the
        # checkpoint, as a chief restores a restarted ps: worker 1 is back at 4.
        _until(lambda: chief_ledger.variables.all_steps(outside)[1] == TRAIN_STEPS, "at 12")
        saver.restore(outside, path)
        _train(chief, chief_ledger, chief_train, chief_counts)
        thread.join(DEADLINE_SECS)
        assert not thread.is_alive() and not errors, errors
        # Worker 1 trained steps 1-12, then 5-12 again after the restore; the chief 1-12.
        assert counts1 == [*range(1, 13), *range(5, 13)]
        assert chief_counts == list(range(1, 13))
        assert chief_ledger.finished == tf_contrib_easgd.FinishedWorkers({1: 12}, [])
        # Exchanges: the checkpoint's 1 (worker 1's at its step 4), worker 1's 2 after the
        # restore (at its steps 8 and 12 again) and the chief's 12 / 4 = 3: 1 + 2 + 3 = 6.
        assert outside.run(global_step) == 6
        # Both counts complete; the end of the job cleared once worker 1 had seen it, so
        # the chief's last checkpoint holds a job that a longer re-run goes on with.
        assert chief_ledger.variables.read(outside) == ([12, 12], False, [False, False])
        # A new session of worker 1 takes its step from the ledger (a plain Session: by
        # `resume`), and has nothing left to train.
        with cluster.session(1, graph1) as again:
            assert ledger1.resume(again) == TRAIN_STEPS
