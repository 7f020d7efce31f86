"""Session creation (tf_contrib_easgd/job/sessions.py): no 30 s wait, and a living centre kept."""

import contextlib
import logging
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope

import tf_contrib_easgd

# MonitoredTrainingSession's non-chief checks readiness, then sleeps this long before it
# checks again; a start-up below it shows that the sleep never happened.
READINESS_SLEEP_SECS = 30


class Worker:
    """One worker's graph: w = [1, 2] (a centre on the ps), SGD on loss = sum(w)."""

    def __init__(self, cluster, index, container):
        self.index = index
        self.cluster = cluster
        self.getter = tf_contrib_easgd.ElasticAverageCustomGetter(f"/job:worker/task:{index}")
        self.graph = tf.Graph()
        with self.graph.as_default(), worker_scope(cluster.spec, index, self.getter, container):
            self.w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
            self.global_step = tf.compat.v1.train.get_or_create_global_step()
            self.opt = tf_contrib_easgd.ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5),
                num_worker=2,
                ea_custom_getter=self.getter,
                communication_period=1,
                rho=0.0,
            )
            self.train_op = self.opt.minimize(tf.reduce_sum(self.w), global_step=self.global_step)
            self.hook = self.opt.make_session_run_hook(index == 0, index)
            (self.centre,) = self.getter.global_centers_by_name()["w"]
            self.set_centre = self.centre.assign([7.0, 8.0])
            self.read_w, self.read_centre = tf.identity(self.w), tf.identity(self.centre)
            self.distance = self.getter.elastic_distance()

    @contextlib.contextmanager
    def session(self, checkpoint_dir=None, **kwargs):
        """`tf_contrib_easgd.MonitoredTrainingSession` of this worker, in its graph.

        The graph stays the default one until the session is closed, as in a script: a
        closed MonitoredSession un-finalizes the default graph, so that the next one can
        run the hooks' `begin()` again.
        """
        with (
            self.graph.as_default(),
            tf_contrib_easgd.MonitoredTrainingSession(
                master=self.cluster.target(self.index),
                is_chief=self.index == 0,
                checkpoint_dir=checkpoint_dir,
                hooks=[self.hook],
                config=self.cluster.session_config(self.index),
                max_wait_secs=20,
                **kwargs,
            ) as session,
        ):
            yield session


def test_a_non_chief_starts_as_soon_as_the_chief_has_set_up_the_centre(world, cluster, container):
    chief, other = Worker(cluster, 0, container), Worker(cluster, 1, container)
    started = {}

    def start_other():
        with other.session() as session:
            started["at"] = time.monotonic()
            started["w"] = session.run(other.read_w)

    thread = threading.Thread(target=start_other)
    thread.start()
    time.sleep(1.0)  # The non-chief polls an uninitialised centre meanwhile.
    with chief.session() as session:
        ready_at = time.monotonic()
        thread.join(READINESS_SLEEP_SECS)
        assert not thread.is_alive()
        session.run(chief.train_op)
    # The non-chief started from the centre, [1, 2], less than the readiness sleep after
    # the chief initialised it (it polls every 0.1 s).
    startup = started["at"] - ready_at
    print(f"non-chief session ready {startup:.2f} s after the chief's")
    assert startup < READINESS_SLEEP_SECS / 3
    np.testing.assert_array_equal(started["w"], [1.0, 2.0])


def test_wait_for_centre_times_out_naming_the_variables(world, cluster, container):
    other = Worker(cluster, 1, container)
    with (
        other.graph.as_default(),
        pytest.raises(TimeoutError, match=r"within 0.5 s; still uninitialised: \[.*w"),
    ):
        tf_contrib_easgd.wait_for_centre(
            cluster.target(1), config=cluster.session_config(1), timeout_secs=0.5
        )


def test_the_chief_keeps_a_centre_the_ps_holds(world, cluster, container, tmp_path):
    # The chief saves a checkpoint of the centre [1, 2]; the centre then moves on to
    # [7, 8] (the other workers' exchanges). A restarted chief keeps [7, 8]: restoring
    # the checkpoint, as TensorFlow's MonitoredTrainingSession does, would lose that.
    chief = Worker(cluster, 0, container)
    with chief.session(checkpoint_dir=str(tmp_path), save_checkpoint_steps=1000) as session:
        pass  # Closing writes a checkpoint of [1, 2].
    assert tf.train.latest_checkpoint(str(tmp_path))
    with chief.session(checkpoint_dir=str(tmp_path)) as session:
        session.run(chief.set_centre)
    restarted = Worker(cluster, 0, container)
    hows = []
    scaffold = tf_contrib_easgd.CentreKeepingScaffold(
        on_centre_ready=lambda session, how, checkpoint: hows.append((how, checkpoint))
    )
    with restarted.session(checkpoint_dir=str(tmp_path), scaffold=scaffold) as session:
        np.testing.assert_array_equal(session.run(restarted.read_centre), [7.0, 8.0])
        # The hook copied the kept centre into the worker: it is 0 away from it.
        assert session.run(restarted.distance) == 0.0
    assert hows == [(tf_contrib_easgd.CentreKeepingScaffold.KEPT, None)]


def test_the_chief_restores_a_centre_the_ps_lost(world, cluster, container, tmp_path):
    # The chief sets the centre to [7, 8] and takes one step: SGD (learning rate 0.5 on
    # sum(w)) moves w from [1, 2] to [0.5, 1.5]; the exchange (period 1, moving rate
    # 0.9 / 1 / 2 = 0.45) moves the centre by 0.45 * ([0.5, 1.5] - [7, 8]) = -2.925 to
    # [4.075, 5.075], global_step 1; closing the session saves that. A fresh container
    # then stands for a restarted, empty parameter server: the chief restores it.
    chief = Worker(cluster, 0, container)
    with chief.session(checkpoint_dir=str(tmp_path), save_checkpoint_steps=1000) as session:
        session.run(chief.set_centre)
        session.run(chief.train_op)
    checkpoint = tf.train.latest_checkpoint(str(tmp_path))
    assert checkpoint.endswith("-1")
    hows = []
    restarted = Worker(cluster, 0, container + "restarted")
    scaffold = tf_contrib_easgd.CentreKeepingScaffold(
        on_centre_ready=lambda session, how, path: hows.append((how, path))
    )
    with restarted.session(checkpoint_dir=str(tmp_path), scaffold=scaffold) as session:
        centre, step = session.run([restarted.read_centre, restarted.global_step])
    np.testing.assert_allclose(centre, [4.075, 5.075], rtol=1e-6)
    assert step == 1
    assert hows == [(tf_contrib_easgd.CentreKeepingScaffold.RESTORED, checkpoint)]


def test_the_chief_initialises_a_new_centre_and_runs_the_users_init_fn(
    world, cluster, container, tmp_path, caplog
):
    chief = Worker(cluster, 0, container)
    calls = []
    user = tf.compat.v1.train.Scaffold(init_fn=lambda scaffold, session: calls.append(1))
    with (
        caplog.at_level(logging.INFO, logger="tensorflow"),
        chief.session(checkpoint_dir=str(tmp_path), scaffold=user) as session,
    ):
        np.testing.assert_array_equal(session.run(chief.read_centre), [1.0, 2.0])
        # One step of SGD with learning rate 0.5 on sum(w): w = [1, 2] - 0.5 = [0.5, 1.5];
        # the exchange (period 1, alpha = 0.9 / 1 / 2 = 0.45) then moves the centre by
        # 0.45 * ([0.5, 1.5] - [1, 2]) = -0.225: [0.775, 1.775], and w by as much back:
        # [0.725, 1.725]. The distance is |[0.725 - 0.775, 1.725 - 1.775]| = 0.05 * sqrt(2).
        session.run(chief.train_op)
        np.testing.assert_allclose(session.run(chief.read_centre), [0.775, 1.775], rtol=1e-6)
        np.testing.assert_allclose(session.run(chief.distance), 0.05 * np.sqrt(2), rtol=1e-5)
        session.run(chief.distance)  # A step that leaves global_step as it is.
    assert calls == [1]
    assert "Initialised the centre." in caplog.text
    # TensorFlow's step counter warns of a global_step that stays; EASGD's does by design.
    assert "has not been increased" not in caplog.text


RUNGRAPH_TWICE = "The same RunGraph (Worker) request was received twice."


class AbortAfterRuns(tf.compat.v1.train.SessionRunHook):
    """Raises TensorFlow's AbortedError after every `every`-th run, `times` times."""

    def __init__(self, every, times):
        self.every, self.times = every, times
        self.runs = self.aborted = 0

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs % self.every == 0 and self.aborted < self.times:
            self.aborted += 1
            raise tf.errors.AbortedError(None, None, RUNGRAPH_TWICE)


def _centre_after(segments, start):
    """The centre after `Worker`'s training from centre `start`, session after session.

    Each new session starts the worker from the centre (the EASGD hook): w = c. One step:
    w <- w - 0.5 (SGD, learning rate 0.5 on sum(w)), then the exchange with
    alpha = 0.9 / 1 / 2 = 0.45 moves w and the centre c towards each other by 0.45 (w - c).
    The exchange keeps w + c, so after n steps w + c = 2 c0 - 0.5 n; the gap D = w - c goes
    D <- 0.1 (D - 0.5) from 0, i.e. D = -(0.5 / 9) (1 - 0.1 ** n). So
    c = ((w + c) - D) / 2 = c0 - 0.25 n + (0.5 / 18) (1 - 0.1 ** n).

    Args:
        segments: the steps of each session, in order.
        start: the centre before the first.
    """
    centre = np.asarray(start)
    for steps in segments:
        centre = centre - 0.25 * steps + (0.5 / 18) * (1 - 0.1**steps)
    return centre


@pytest.mark.parametrize("ours", [False, True], ids=["tensorflow", "tf_contrib_easgd"])
def test_session_rebuilds_set_the_centre_back_only_with_tensorflows_session(
    world, cluster, container, tmp_path, ours
):
    # 20 steps; an abort after the 5th, 10th and 15th run of the train op. MonitoredSession
    # then makes a new session and runs the aborted step again: 23 runs in all. The chief
    # saves a checkpoint each time it creates a session (save_checkpoint_steps is large),
    # so TensorFlow's chief finds only the one of global_step 0 and restores it over the
    # centre at each rebuild: 5 steps lost three times, 23 - 15 = 8 steps left. Ours keeps
    # the centre the ps holds: all 23 steps count (period 1: one exchange per step).
    chief = Worker(cluster, 0, container)
    aborts = AbortAfterRuns(every=5, times=3)
    hows = []
    create = tf.compat.v1.train.MonitoredTrainingSession
    scaffold = None
    if ours:
        create = tf_contrib_easgd.MonitoredTrainingSession
        scaffold = tf_contrib_easgd.CentreKeepingScaffold(
            on_centre_ready=lambda session, how, path: hows.append(how)
        )
    with (
        chief.graph.as_default(),
        create(
            master=cluster.target(0),
            is_chief=True,
            checkpoint_dir=str(tmp_path),
            scaffold=scaffold,
            hooks=[chief.hook, aborts],
            config=cluster.session_config(0),
            save_checkpoint_steps=1000,
            save_summaries_steps=None,
            log_step_count_steps=None,
        ) as session,
    ):
        for _ in range(20):
            session.run(chief.train_op)
        step, centre = session.run([chief.global_step, chief.read_centre])
    assert (aborts.aborted, aborts.runs) == (3, 24)  # 23 of the train op, then the read.
    print(f"{'ours' if ours else 'TensorFlow'}: global_step {step}, centre {centre}")
    # Sessions of 5, 5, 5 and 8 steps; TensorFlow's last starts from the checkpoint's centre
    # [1, 2], ours from the centre the others left: [-4.639, -3.639] against [-0.972, 0.028].
    assert step == (23 if ours else 8)
    segments = [5, 5, 5, 8] if ours else [8]
    np.testing.assert_allclose(centre, _centre_after(segments, [1.0, 2.0]), rtol=1e-5)
    if ours:
        kept = tf_contrib_easgd.CentreKeepingScaffold.KEPT
        assert hows == [tf_contrib_easgd.CentreKeepingScaffold.INITIALISED] + [kept] * 3
