"""An easgd-train worker: its start, its training loop, its recoveries and its end of the job.

`run_worker` trains worker `task_index` in `MonitoredSession`s, a new one after each lost
parameter server (`train_with_recovery`); the chief, worker 0, then waits for the others,
checkpoints and exports the centre (`export`), and stops the parameter servers. See
docs/DESIGN.md, "The trainer's task lifecycle", for the order of it all.
"""

import dataclasses
import functools
import os
import time

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import (
    CentreKeepingScaffold,
    CentreWaitingSessionCreator,
    train_with_recovery,
    wait_until_reachable,
)
from tf_contrib_easgd.trainer import (
    checkpoint_fit,
    cluster,
    data,
    export,
    files,
    finish,
    graph,
    progress,
    stall,
)
from tf_contrib_easgd.trainer.config import TrainConfig


@dataclasses.dataclass(frozen=True)
class Worker:
    """What the sessions of one worker share, from start to end."""

    task: cluster.TaskConfig
    config: TrainConfig
    server: tf.compat.v1.train.Server
    session_config: tf.compat.v1.ConfigProto
    g: graph.WorkerGraph
    dataset: data.Dataset
    images: np.ndarray
    labels: np.ndarray
    reporter: progress.Reporter
    writer: tf.compat.v1.summary.FileWriter
    started_at: float
    stall: stall.StallWatch


@dataclasses.dataclass
class TrainState:
    """What a worker has done so far; it outlives the sessions that recoveries replace."""

    step: int = 0  # The ledger's `step`, as of the last call to it.
    train_secs: float = 0.0
    steps_taken: int = 0  # By this process (a restarted worker resumes from the ledger).
    recoveries: int = 0
    recovering_since: float | None = None  # `time.monotonic()` at the recovery under way.
    restored: dict = dataclasses.field(default_factory=dict)

    def begin_recovery(self):
        """Counts a recovery and notes when it began, for the next "started" event."""
        self.recoveries += 1
        self.recovering_since = time.monotonic()


def run_worker(task, config, reporter, started_at, rejoin=None):
    """Trains worker `task.task_index`; the chief also exports and evaluates the centre.

    The arguments are `task.run`'s (`started_at` given).

    Returns:
        For the chief, the summary dict; otherwise None.

    Raises:
        TimeoutError: if a parameter server is not reachable, or the chief does not
            initialise the centre, within `config.timeout_secs`.
        UsageError: if the chief's latest checkpoint holds another model
            (`checkpoint_fit.check`).
    """
    dataset = data.load(config.dataset)
    images, labels = dataset.shard(task.task_index, task.num_workers)
    # Every blocking op (the synchronous start-up barrier, a read from a parameter server
    # that went away) fails after the timeout instead of hanging.
    session_config = task.session_config(operation_timeout_secs=config.timeout_secs)
    server = tf.compat.v1.train.Server(
        task.cluster_spec(),
        job_name=task.job_name,
        task_index=task.task_index,
        config=session_config,
        start=True,
    )
    g = graph.build_worker_graph(task, config, dataset.image_shape, dataset.num_classes)
    if task.is_chief:  # Before a restore that would fail deep in TensorFlow.
        checkpoint_fit.check(config.model_dir, g.graph)
    os.makedirs(config.model_dir, exist_ok=True)
    reporter.event("waiting", what=f"parameter servers {list(task.ps_hosts)}")
    wait_until_reachable(task.ps_hosts, config.timeout_secs)
    with g.graph.as_default():
        if not task.is_chief:
            # The session creator waits (`CentreWaitingSessionCreator`).
            reporter.event("waiting", what="the chief to initialise the centre")
        writer = tf.compat.v1.summary.FileWriter(
            files.events_dir(config.model_dir, task.task_index),
            graph=g.graph if task.is_chief else None,
        )
        # A step lost on a ps that takes connections is given up before the session's
        # operation timeout would fail the process.
        watch = stall.StallWatch(
            reporter,
            config.stall_report_secs,
            task.ps_hosts,
            rejoin=rejoin,
            stuck_after_secs=stall.stuck_after_secs(config.timeout_secs),
        )
        worker = Worker(
            task, config, server, session_config, g, dataset, images, labels, reporter,
            writer, started_at, watch,
        )  # fmt: skip
        state = TrainState()
        outcome = _train_with_recovery(worker, state)
        watch.close()
        writer.close()
        if task.is_chief:  # Its last session is closed: the final checkpoint is written.
            g.ledger.stop_parameter_servers(server.target, config=session_config)
    if not task.is_chief:
        return None
    summary = export.write_job_summary(worker, outcome, state)
    reporter.event("summary", **summary)
    return summary


def _train_with_recovery(worker, state):
    """Runs `_run_session` until it returns, again after each lost parameter server."""

    def on_recovery(error, recoveries):
        # Then a new session: the chief restores the centre if the ps lost it.
        del recoveries  # `state` counts the recoveries of `_RecoveryReporter` too.
        state.begin_recovery()
        worker.reporter.event(
            "recovering", step=state.step, error=f"{type(error).__name__}: {_first_line(error)}"
        )

    return train_with_recovery(
        lambda: _run_session(worker, state),
        worker.task.ps_hosts,
        timeout_secs=worker.config.timeout_secs,
        on_recovery=on_recovery,
    )


def _run_session(worker, state):
    """Trains in one `MonitoredSession` until `config.steps`, then ends the job (the
    ledger's `finish`); back to training when the ledger sends it back.

    Returns:
        For the chief, the `finish.Outcome`; else None.
    """
    creator = _RecoveryReporter(_session_creator(worker, state), worker, state)
    hooks = [worker.g.hook, worker.g.ledger.hook, _StartReporter(worker, state)]
    with tf.compat.v1.train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
        while True:
            train_started = time.monotonic()
            try:
                _train(sess, worker, state)
            finally:
                state.train_secs += time.monotonic() - train_started
            worker.reporter.event(
                "done",
                steps=state.step,
                secs=state.train_secs,
                steps_per_sec=state.steps_taken / max(state.train_secs, 1e-9),
            )
            if sess.should_stop():  # No hook of the trainer asks for it.
                raise RuntimeError(f"the session stopped at local step {state.step}")
            ended = finish.finish(sess, worker)
            state.step = worker.g.ledger.step
            if ended is not None:
                return ended if worker.task.is_chief else None


def _session_creator(worker, state):
    """The session creator of `MonitoredTrainingSession`, without its default hooks (no
    `CheckpointSaverHook`: the loop saves). The chief's keeps a centre the ps still hold, or
    restores the latest checkpoint; a non-chief's waits for the centre first."""
    g, config = worker.g, worker.config
    if not worker.task.is_chief:
        return CentreWaitingSessionCreator(
            scaffold=tf.compat.v1.train.Scaffold(saver=g.saver),
            master=worker.server.target,
            config=worker.session_config,
            max_wait_secs=config.timeout_secs,
        )
    scaffold = CentreKeepingScaffold(
        saver=g.saver,
        on_centre_ready=functools.partial(_record_centre_set_up, g=g, state=state),
    )
    return tf.compat.v1.train.ChiefSessionCreator(
        scaffold=scaffold,
        master=worker.server.target,
        config=worker.session_config,
        checkpoint_dir=config.model_dir,
    )


def _record_centre_set_up(session, how, checkpoint, g, state):
    """Records in `state.restored` how the chief's new session set up the centre: after a
    restore, the step and a digest of the centre read right after it."""
    if how != CentreKeepingScaffold.RESTORED:
        state.restored = {"restored_from": None}
        return
    step, centre = session.run([g.global_step, g.centre_by_name()])
    state.restored = {
        "restored_from": os.path.basename(checkpoint),
        "restored_global_step": int(step),
        "restored_centre_sha256": export.centre_digest(centre),
    }


class _RecoveryReporter(tf.compat.v1.train.SessionCreator):
    """Reports "recovering" when `MonitoredSession` replaces a session that lost a task (it
    does by itself: docs/DESIGN.md, "Recovery"), at the first attempt, before the wait."""

    def __init__(self, creator, worker, state):
        self._creator = creator
        self._worker = worker
        self._state = state
        self._created = False  # A session was created: later calls are recoveries.
        self._reported = False  # The recovery under way is reported.

    def create_session(self):
        state = self._state
        if self._created and not self._reported:
            state.begin_recovery()
            self._reported = True
            self._worker.reporter.event(
                "recovering",
                step=state.step,
                error="a task stopped answering or was restarted; MonitoredTrainingSession "
                "makes a new session",
            )
        session = self._creator.create_session()
        self._created, self._reported = True, False
        return session


class _StartReporter(tf.compat.v1.train.SessionRunHook):
    """After each session creation (after the EASGD hook's start-up), takes this worker's
    count of steps from the ledger, which goes with the centre, and reports "started"."""

    def __init__(self, worker, state):
        self._worker = worker
        self._state = state

    def after_create_session(self, session, coord):
        del coord  # Unused.
        state = self._state
        state.step = self._worker.g.ledger.step  # Its hook, before this one, read it.
        self._worker.reporter.event("started", **_start_report(session, self._worker, state))
        state.recovering_since = None


def _start_report(session, worker, state):
    """The fields of the "started" event: where the new session found the job.

    `global_step` counts the exchanges so far, `distance` is the elastic distance right
    after the hook copied the centre into the worker (0), `transport` how the exchanges
    reach the parameter servers; `startup_secs` counts from the start of this run of the
    process, `recovery_secs` from that of the recovery, if any. The chief adds
    `centre_sha256` (`export.centre_digest`), `centre_ps` (which ps holds which centre)
    and, after a restore, where from.
    """
    g, task = worker.g, worker.task
    fetches = {"global_step": g.global_step, "distance": g.distance}
    if task.is_chief:
        fetches["centre"] = g.centre_by_name()
    values = session.run(fetches)
    now = time.monotonic()
    report = {
        "startup_secs": now - worker.started_at,
        "step": state.step,
        "recoveries": state.recoveries,
        "global_step": int(values["global_step"]),
        "distance": float(values["distance"]),
        "transport": g.hook.exchange_transport,
    }
    if state.recovering_since is not None:
        report["recovery_secs"] = now - state.recovering_since
    if task.is_chief:
        report["centre_sha256"] = export.centre_digest(values["centre"])
        report["centre_ps"] = export.centre_placement(g.centres)
        report.update(state.restored)
    return report


def _train(sess, worker, state):
    """The session loop: local steps from `state.step` on, until `config.steps`."""
    g, task, config = worker.g, worker.task, worker.config
    batches = data.batches(
        worker.images,
        worker.labels,
        config.batch_size,
        seed=(config.seed, task.task_index, state.step),
    )
    window = progress.Window(state.step)
    while state.step < config.steps and not sess.should_stop():
        x, y = next(batches)
        # All that the step calls on the parameter servers: the step, the ledger, reports.
        with worker.stall.step(state.step):
            loss, _ = sess.run([g.loss, g.train_op], {g.images: x, g.labels: y})
            window.losses.append(loss)
            step, last = state.step + 1, state.step + 1 == config.steps
            saving = task.is_chief and step % config.save_checkpoint_steps == 0 and not last
            # The ledger counts the steps the centre has seen: those up to an exchange,
            # the last, and (the chief) those of its checkpoints.
            state.step = g.ledger.count(sess, record=saving)
            state.steps_taken += 1
            if step % config.log_every_steps == 0 or last:
                _report_progress(sess, worker, step, window)
        evaluating = (
            task.is_chief
            and config.eval_every_steps
            and (step % config.eval_every_steps == 0 or last)
        )
        if evaluating or saving:
            # An evaluation of a large dataset or a save to a slow disk may take long:
            # watched, but never given up as stuck.
            with worker.stall.step(step, may_be_stuck=False):
                if evaluating:
                    _report_centre(sess, worker, step)
                if saving:
                    export.save_checkpoint(sess, g, config.model_dir)


def _report_progress(sess, worker, step, window):
    """Reports the mean loss, the elastic distance and the speed since `window` began, to
    the launcher and to TensorBoard; `window` begins again at `step`."""
    distance, exchanges = sess.run([worker.g.distance, worker.g.global_step])
    loss, rate = window.report(worker.reporter, step, worker.config.steps, distance, exchanges)
    scalars = {"loss": loss, "elastic_distance": float(distance), "steps_per_sec": rate}
    worker.writer.add_summary(export.scalars_summary(scalars), step)


def _report_centre(sess, worker, step):
    """The chief's learning curve: evaluates the centre and reports it."""
    accuracy, loss = export.evaluate_centre(sess, worker.g, worker.dataset)
    worker.reporter.event("centre", step=step, accuracy=accuracy, loss=loss)
    worker.writer.add_summary(
        export.scalars_summary({"centre/test_accuracy": accuracy, "centre/test_loss": loss}), step
    )


def _first_line(error):
    """The first line of an error's message, for a progress event."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""
