"""One task of an easgd-train job: a parameter server, or a worker training with EASGD.

A worker builds its own graph (between-graph replication): the model under an
`ElasticAverageCustomGetter` inside a `replica_device_setter`, an `ElasticAverageOptimizer`
around the chosen optimizer, and trains its shard of the data for `steps` local steps in a
`MonitoredSession` (with the session creators of `MonitoredTrainingSession`). Worker 0, the
chief, initialises the centre, writes the checkpoints and, once every worker has reported
that it is done, exports the centre with
`swapping_saver`, restores it into a plain model, evaluates it on the test split, writes
`summary.json` and tells the parameter servers to stop. A parameter server serves until
the chief tells it the job is done.

The start, the end and the recoveries use the library's public pieces, as a script of
one's own would: `MonitoredTrainingSession`'s session creators with a
`CentreWaitingSessionCreator` or a `CentreKeepingScaffold`, `TrainingCompletion`,
`serve_until_done` and `train_with_recovery`.
"""

import dataclasses
import functools
import hashlib
import json
import os
import time

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import (
    CentreKeepingScaffold,
    CentreWaitingSessionCreator,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
    TrainingCompletion,
    serve_until_done,
    train_with_recovery,
    wait_until_reachable,
)
from tf_contrib_easgd.trainer import data, models

#: The optimizers `make_optimizer` builds (the `--optimizer` choices).
OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adagrad", "rmsprop")
MOMENTUM = 0.9

SUMMARY_FILE = "summary.json"
EXPORT_DIR = "export"
EXPORT_PREFIX = "centre"
CHECKPOINT_PREFIX = "model.ckpt"

_EVAL_BATCH = 1000


def make_optimizer(name, learning_rate):
    """Returns the `tf.compat.v1.train` optimizer called `name` (see `OPTIMIZERS`).

    Args:
        name: one of `OPTIMIZERS`; `momentum` and `nesterov` use momentum 0.9.
        learning_rate: the learning rate.

    Raises:
        ValueError: if `name` is not one of `OPTIMIZERS`.
    """
    train = tf.compat.v1.train
    if name == "sgd":
        return train.GradientDescentOptimizer(learning_rate)
    if name in ("momentum", "nesterov"):
        return train.MomentumOptimizer(learning_rate, MOMENTUM, use_nesterov=name == "nesterov")
    if name == "adam":
        return train.AdamOptimizer(learning_rate)
    if name == "adagrad":
        return train.AdagradOptimizer(learning_rate)
    if name == "rmsprop":
        return train.RMSPropOptimizer(learning_rate)
    raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {name!r}.")


def run(task, config, reporter, started_at=None):
    """Runs `task` until the job is done.

    Args:
        task: the `cluster.TaskConfig` of this process.
        config: the `train.TrainConfig` of the job.
        reporter: the `progress.Reporter` that prints this task's events.
        started_at: `time.monotonic()` when the process started, for the timings.

    Returns:
        For the chief, the summary dict also written to `summary.json`; otherwise None.
    """
    started_at = time.monotonic() if started_at is None else started_at
    if task.is_ps:
        run_ps(task, reporter)
        return None
    return run_worker(task, config, reporter, started_at)


def run_ps(task, reporter):
    """Serves the centre until the chief puts a token into this server's shutdown queue.

    A parameter server has nothing to time out on: it serves as long as the job runs, and
    whoever started it stops it if the chief never finishes.
    """
    server = tf.compat.v1.train.Server(
        task.cluster_spec(),
        job_name=task.job_name,
        task_index=task.task_index,
        config=task.session_config(),
        start=True,
    )
    reporter.event("serving", address=task.address)
    serve_until_done(server)
    reporter.event("stopped")


@dataclasses.dataclass
class WorkerGraph:
    """The graph of one worker and the tensors and ops the session loop uses."""

    graph: tf.Graph
    images: tf.Tensor
    labels: tf.Tensor
    loss: tf.Tensor
    train_op: tf.Operation
    global_step: tf.Variable
    distance: tf.Tensor
    eval_images: tf.Tensor
    eval_labels: tf.Tensor
    centre_correct: tf.Tensor
    centre_loss: tf.Tensor
    optimizer: ElasticAverageOptimizer
    centres: list
    hook: tf.compat.v1.train.SessionRunHook
    saver: tf.compat.v1.train.Saver
    export_saver: tf.compat.v1.train.Saver
    completion: TrainingCompletion


def build_worker_graph(task, config, image_shape, num_classes):
    """Builds the training graph of worker `task.task_index`.

    Args:
        task: the `cluster.TaskConfig` of a worker.
        config: the `train.TrainConfig` of the job.
        image_shape: `(height, width, channels)` of the images.
        num_classes: number of classes.

    Returns:
        A `WorkerGraph`.
    """
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(config.seed)
        getter = ElasticAverageCustomGetter(worker_device=task.device)
        device_setter = tf.compat.v1.train.replica_device_setter(
            worker_device=task.device, cluster=task.cluster_spec()
        )
        with tf.compat.v1.device(device_setter):
            images = tf.compat.v1.placeholder(tf.float32, [None, *image_shape], name="images")
            labels = tf.compat.v1.placeholder(tf.int64, [None], name="labels")
            with tf.compat.v1.variable_scope(
                tf.compat.v1.get_variable_scope(), custom_getter=getter
            ):
                logits = models.build_model(config.model, images, num_classes)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
                name="loss",
            )
            global_step = tf.compat.v1.train.get_or_create_global_step()
            optimizer = ElasticAverageOptimizer(
                make_optimizer(config.optimizer, config.learning_rate),
                num_worker=task.num_workers,
                ea_custom_getter=getter,
                communication_period=config.communication_period,
                moving_rate=config.moving_rate,
                rho=config.rho,
                synchronous=config.synchronous,
            )
            train_op = optimizer.minimize(loss, global_step=global_step)
            hook = optimizer.make_session_run_hook(task.is_chief, task.task_index)
            distance = getter.elastic_distance()

            # The same model once more, on the centres: the chief's learning curve.
            centres = getter.global_centers_by_name()

            def centre_getter(getter, name, *args, **kwargs):
                del getter, args, kwargs  # The variables exist: the model's centres.
                return centres[name][0]

            eval_images = tf.compat.v1.placeholder(tf.float32, [None, *image_shape])
            eval_labels = tf.compat.v1.placeholder(tf.int64, [None])
            with (
                tf.name_scope("centre_eval"),
                tf.compat.v1.variable_scope(
                    tf.compat.v1.get_variable_scope(),
                    custom_getter=centre_getter,
                ),
            ):
                centre_logits = models.build_model(config.model, eval_images, num_classes)
                centre_correct = tf.reduce_sum(
                    tf.cast(tf.equal(tf.argmax(centre_logits, 1), eval_labels), tf.float64)
                )
                centre_loss = tf.reduce_sum(
                    tf.cast(
                        tf.nn.sparse_softmax_cross_entropy_with_logits(
                            labels=eval_labels, logits=centre_logits
                        ),
                        tf.float64,
                    )
                )
            saver = tf.compat.v1.train.Saver(
                sharded=True, max_to_keep=3, save_relative_paths=True, name="checkpoint_saver"
            )
            export_saver = optimizer.swapping_saver(name="export_saver")
        with tf.compat.v1.device(task.device):
            completion = TrainingCompletion(task.cluster_spec(), task.is_chief, task.task_index)
    return WorkerGraph(
        graph=graph,
        images=images,
        labels=labels,
        loss=loss,
        train_op=train_op,
        global_step=global_step,
        distance=distance,
        eval_images=eval_images,
        eval_labels=eval_labels,
        centre_correct=centre_correct,
        centre_loss=centre_loss,
        optimizer=optimizer,
        centres=[entry.global_center for entry in getter.centered_variables()],
        hook=hook,
        saver=saver,
        export_saver=export_saver,
        completion=completion,
    )


def run_worker(task, config, reporter, started_at):
    """Trains worker `task.task_index`; the chief also exports and evaluates the centre.

    Returns:
        For the chief, the summary dict; otherwise None.

    Raises:
        TimeoutError: if a parameter server is not reachable, or the chief does not
            initialise the centre, within `config.timeout_secs`.
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
    g = build_worker_graph(task, config, dataset.image_shape, dataset.num_classes)
    os.makedirs(config.model_dir, exist_ok=True)
    reporter.event("waiting", what=f"parameter servers {list(task.ps_hosts)}")
    wait_until_reachable(task.ps_hosts, config.timeout_secs)
    with g.graph.as_default():
        if not task.is_chief:
            # The session creator waits (`CentreWaitingSessionCreator`).
            reporter.event("waiting", what="the chief to initialise the centre")
        writer = tf.compat.v1.summary.FileWriter(
            os.path.join(config.model_dir, f"worker_{task.task_index}"),
            graph=g.graph if task.is_chief else None,
        )
        worker = _Worker(
            task, config, server, session_config, g, dataset, images, labels, reporter,
            writer, started_at,
        )  # fmt: skip
        state = _TrainState()

        def on_recovery(error, recoveries):
            # A parameter server went away. Wait until it answers again, then start a new
            # session: the chief restores the centre from the latest checkpoint if the ps
            # lost it; every worker then starts again from the centre.
            state.recoveries += 1
            reporter.event(
                "recovering", step=state.step, error=f"{type(error).__name__}: {_first_line(error)}"
            )

        outcome = train_with_recovery(
            lambda: _run_session(worker, state),
            task.ps_hosts,
            timeout_secs=config.timeout_secs,
            on_recovery=on_recovery,
        )
        writer.close()
        if task.is_chief:
            g.completion.stop_parameter_servers(server.target, config=session_config)
        else:
            with tf.compat.v1.Session(server.target, graph=g.graph, config=session_config) as raw:
                g.completion.finish(raw, state.step)
    if not task.is_chief:
        return None

    local_steps, checkpoint, export_path, exchanges = outcome
    evaluation = models.evaluate_checkpoint(
        export_path, config.model, dataset.x_test, dataset.y_test, dataset.num_classes
    )
    summary = {
        "test_accuracy": float(evaluation["accuracy"]),
        "test_loss": float(evaluation["loss"]),
        "test_examples": len(dataset.x_test),
        "dataset": os.path.basename(dataset.name),
        "model": config.model,
        "optimizer": config.optimizer,
        "learning_rate": config.learning_rate,
        "communication_period": config.communication_period,
        "moving_rate": g.optimizer.moving_rate,
        "rho": config.rho,
        "synchronous": config.synchronous,
        "batch_size": config.batch_size,
        "seed": config.seed,
        "num_ps": task.num_ps,
        "num_workers": task.num_workers,
        "local_steps": dict(sorted(local_steps.items(), key=lambda item: int(item[0]))),
        "exchanges": exchanges,
        "chief_train_secs": state.train_secs,
        "chief_steps_per_sec": state.step / max(state.train_secs, 1e-9),
        "chief_recoveries": state.recoveries,
        "chief_secs": time.monotonic() - started_at,
        "model_dir": config.model_dir,
        "checkpoint": checkpoint,
        "export": export_path,
    }
    write_summary(config.model_dir, summary)
    reporter.event("summary", **summary)
    return summary


@dataclasses.dataclass(frozen=True)
class _Worker:
    """What the sessions of one worker share, from start to end."""

    task: object  # cluster.TaskConfig
    config: object  # train.TrainConfig
    server: tf.compat.v1.train.Server
    session_config: tf.compat.v1.ConfigProto
    g: WorkerGraph
    dataset: data.Dataset
    images: np.ndarray
    labels: np.ndarray
    reporter: object  # progress.Reporter
    writer: tf.compat.v1.summary.FileWriter
    started_at: float


@dataclasses.dataclass
class _TrainState:
    """What a worker has done so far; it outlives the sessions that recoveries replace."""

    step: int = 0
    train_secs: float = 0.0
    recoveries: int = 0
    restored: dict = dataclasses.field(default_factory=dict)


def _run_session(worker, state):
    """Trains in one `MonitoredSession` until `config.steps`; the chief then exports.

    Returns:
        For the chief, `(local_steps, checkpoint, export_path, exchanges)`; else None.
    """
    g, task, config, reporter = worker.g, worker.task, worker.config, worker.reporter
    # Checkpoints are written by `_save_checkpoint`, not by MonitoredTrainingSession's
    # `CheckpointSaverHook`: that hook reads global_step from the parameter server at
    # every step, which halves the chief's speed here. So the session creators of
    # `tf_contrib_easgd.MonitoredTrainingSession` are used without its default hooks (no
    # summaries, no step counter): the chief's keeps a centre the ps still holds, or
    # restores the latest checkpoint; a non-chief's waits for the centre first.
    if task.is_chief:
        scaffold = CentreKeepingScaffold(
            saver=g.saver,
            on_centre_ready=functools.partial(_record_centre_set_up, g=g, state=state),
        )
        creator = tf.compat.v1.train.ChiefSessionCreator(
            scaffold=scaffold,
            master=worker.server.target,
            config=worker.session_config,
            checkpoint_dir=config.model_dir,
        )
    else:
        creator = CentreWaitingSessionCreator(
            scaffold=tf.compat.v1.train.Scaffold(saver=g.saver),
            master=worker.server.target,
            config=worker.session_config,
            max_wait_secs=config.timeout_secs,
        )
    with tf.compat.v1.train.MonitoredSession(
        session_creator=creator, hooks=[g.hook, _StartReporter(worker, state)]
    ) as sess:
        train_started = time.monotonic()
        try:
            _train(sess, worker, state)
        finally:
            state.train_secs += time.monotonic() - train_started
        reporter.event(
            "done",
            steps=state.step,
            secs=state.train_secs,
            steps_per_sec=state.step / max(state.train_secs, 1e-9),
        )
        if not task.is_chief:
            return None
        others = task.num_workers - 1
        if others:
            reporter.event("waiting", what=f"{others} other worker(s) to finish")
        finished = g.completion.finish(sess, state.step, timeout_secs=config.timeout_secs)
        if finished.missing:
            reporter.event(
                "warning",
                message=f"workers {finished.missing} did not finish within "
                f"{config.timeout_secs:g} s; exporting the centre as it is",
            )
        local_steps = {str(index): steps for index, steps in finished.local_steps.items()}
        local_steps[str(task.task_index)] = state.step
        checkpoint = _save_checkpoint(sess, g, config.model_dir)
        export_path = g.export_saver.save(
            _raw_session(sess),
            os.path.join(config.model_dir, EXPORT_DIR, EXPORT_PREFIX),
            write_meta_graph=False,
        )
        return local_steps, checkpoint, export_path, int(sess.run(g.global_step))


def _record_centre_set_up(session, how, checkpoint, g, state):
    """Records in `state.restored` how the chief's new session set up the centre.

    After a restore, the step and a digest of the centre read right after it.
    """
    if how != CentreKeepingScaffold.RESTORED:
        state.restored = {"restored_from": None}
        return
    step, centre = session.run([g.global_step, _centre_by_name(g)])
    state.restored = {
        "restored_from": os.path.basename(checkpoint),
        "restored_global_step": int(step),
        "restored_centre_sha256": centre_digest(centre),
    }


class _StartReporter(tf.compat.v1.train.SessionRunHook):
    """Reports "started" after each session creation (after the EASGD hook's start-up).

    `MonitoredSession` recovers by itself from an `AbortedError` or
    `UnavailableError` (a direct exchange call that reaches a restarted ps fails with the
    former) by creating a new session; that recovery is reported too, once however many
    attempts it takes, as the recovery loop of `run_worker` reports its own.
    """

    def __init__(self, worker, state):
        self._worker = worker
        self._state = state
        self._started = False  # A session of this MonitoredSession reported "started".
        self._recovering = False  # The recovery since that session is reported.

    def after_create_session(self, session, coord):
        del coord  # Unused.
        worker, state = self._worker, self._state
        if self._started and not self._recovering:
            state.recoveries += 1
            self._recovering = True
            worker.reporter.event(
                "recovering",
                step=state.step,
                error="MonitoredTrainingSession lost a task and created a new session",
            )
        report = _start_report(session, worker.g, worker.task, state, worker.started_at)
        worker.reporter.event("started", **report)
        self._started, self._recovering = True, False


def _start_report(session, g, task, state, started_at):
    """The fields of the "started" event: where the new session found the job.

    `global_step` is the number of exchanges so far (above 0 for a worker that joins late or
    is restarted) and `distance` the elastic distance right after the hook copied the centre
    into the worker (0); `transport` how its exchanges reach the parameter servers
    ("direct" or "remote_call", see tf_contrib_easgd/transport.py). The chief adds
    `centre_sha256`, a digest of the centre as it is on the parameter servers (after a
    restore: as in the checkpoint; see `centre_digest`).
    """
    fetches = {"global_step": g.global_step, "distance": g.distance}
    if task.is_chief:
        fetches["centre"] = _centre_by_name(g)
    values = session.run(fetches)
    report = {
        "startup_secs": time.monotonic() - started_at,
        "step": state.step,
        "recoveries": state.recoveries,
        "global_step": int(values["global_step"]),
        "distance": float(values["distance"]),
        "transport": g.hook.exchange_transport,
    }
    if task.is_chief:
        report["centre_sha256"] = centre_digest(values["centre"])
        report.update(state.restored)
    return report


def _centre_by_name(g):
    """`{variable name: global centre}`, a fetch whose value `centre_digest` takes."""
    return {v.op.name: v for v in g.centres}


def centre_digest(arrays_by_name):
    """Returns a SHA-256 hex digest of named arrays: equal digests mean equal values.

    Args:
        arrays_by_name: `{variable name: numpy array}`, e.g. the global centres as a
            session reads them or as a checkpoint reader returns them.
    """
    digest = hashlib.sha256()
    for name in sorted(arrays_by_name):
        array = np.ascontiguousarray(arrays_by_name[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}:".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _save_checkpoint(sess, g, model_dir):
    """Writes a checkpoint of the global variables (the centre, global_step) to `model_dir`.

    Returns:
        The checkpoint's path prefix.
    """
    return g.saver.save(
        _raw_session(sess),
        os.path.join(model_dir, CHECKPOINT_PREFIX),
        global_step=g.global_step,
        write_meta_graph=False,
    )


def _raw_session(sess):
    """The `tf.compat.v1.Session` inside a `MonitoredSession`, as it is now.

    Savers and one-off reads run on it directly. Not through `run_step_fn`: when its
    function fails on a lost parameter server, `run_step_fn` creates a new session and
    calls the function again with the closed one. Here the error reaches the recovery
    loop of `run_worker` instead.
    """
    return sess.run_step_fn(lambda step_context: step_context.session)


def _train(sess, worker, state):
    """The session loop: local steps from `state.step` on, until `config.steps`."""
    g, task, config, dataset = worker.g, worker.task, worker.config, worker.dataset
    images, labels, reporter, writer = worker.images, worker.labels, worker.reporter, worker.writer
    batches = data.batches(
        images, labels, config.batch_size, seed=(config.seed, task.task_index, state.step)
    )
    step = state.step
    mark_step, mark_time, losses = step, time.monotonic(), []
    while step < config.steps and not sess.should_stop():
        x, y = next(batches)
        loss, _ = sess.run([g.loss, g.train_op], {g.images: x, g.labels: y})
        losses.append(loss)
        step += 1
        state.step = step
        last = step == config.steps
        if step % config.log_every_steps == 0 or last:
            distance, exchanges = sess.run([g.distance, g.global_step])
            now = time.monotonic()
            rate = (step - mark_step) / max(now - mark_time, 1e-9)
            loss = float(np.mean(losses))
            reporter.event(
                "progress",
                step=step,
                steps=config.steps,
                loss=loss,
                distance=float(distance),
                steps_per_sec=rate,
                exchanges=int(exchanges),
            )
            scalars = {"loss": loss, "elastic_distance": float(distance), "steps_per_sec": rate}
            writer.add_summary(_summary(scalars), step)
            mark_step, mark_time, losses = step, now, []
        if (
            task.is_chief
            and config.eval_every_steps
            and (step % config.eval_every_steps == 0 or last)
        ):
            accuracy, loss = _evaluate_centre(sess, g, dataset)
            reporter.event("centre", step=step, accuracy=accuracy, loss=loss)
            writer.add_summary(
                _summary({"centre/test_accuracy": accuracy, "centre/test_loss": loss}), step
            )
        if task.is_chief and step % config.save_checkpoint_steps == 0 and not last:
            _save_checkpoint(sess, g, config.model_dir)


def _evaluate_centre(sess, g, dataset):
    """Returns the accuracy and mean loss of the current centre on the test split."""
    totals = np.zeros(2)
    for start in range(0, len(dataset.x_test), _EVAL_BATCH):
        feed = {
            g.eval_images: dataset.x_test[start : start + _EVAL_BATCH],
            g.eval_labels: dataset.y_test[start : start + _EVAL_BATCH],
        }
        totals += sess.run([g.centre_correct, g.centre_loss], feed)
    return float(totals[0] / len(dataset.x_test)), float(totals[1] / len(dataset.x_test))


def _summary(values):
    """Returns a `Summary` proto with one scalar per item of `values`."""
    return tf.compat.v1.Summary(
        value=[tf.compat.v1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()]
    )


def write_summary(model_dir, summary):
    """Writes `summary` as JSON to `model_dir/summary.json` (atomically) and returns the path."""
    path = os.path.join(model_dir, SUMMARY_FILE)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as file:
        json.dump(summary, file, indent=2, sort_keys=True)
        file.write("\n")
    os.replace(partial, path)
    return path


def _first_line(error):
    """The first line of an error's message, for a progress event."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""
