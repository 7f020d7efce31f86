"""What an easgd-train worker writes and measures: checkpoints, the export, the evaluations.

The chief checkpoints the centre, exports it under the plain model's names, evaluates it
(during training in its own graph, at the end as a plain model restored from the export)
and writes `summary.json`; `centre_digest` tells whether two centres are equal. See
docs/DESIGN.md, "The trainer's task lifecycle"; the file names are in `files`.
"""

import contextlib
import hashlib
import os
import re
import time

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import is_recoverable_error
from tf_contrib_easgd.trainer import files, models

#: A line of TensorFlow's error about a file: `<path>; <what the OS said>`.
_FILE_ERROR = re.compile(r"^\s*\S+; (?P<reason>[^\n\[]*[^\s\[])", re.MULTILINE)
#: The starts of the lines of a TensorFlow error that only say where it happened.
_CONTEXT = (
    "Graph execution error", "Detected at node", "File ", "Node:", "From /job:", "[[", "Hint:",
    "Additional GRPC", ":UNKNOWN",
)  # fmt: skip


def raw_session(sess):
    """The `tf.compat.v1.Session` inside a `MonitoredSession`, as it is now.

    Savers and one-off reads run on it directly: through `run_step_fn`, a function that
    fails on a lost parameter server would be called again with the closed session, while
    here the error reaches the worker's recovery loop.
    """
    return sess.run_step_fn(lambda step_context: step_context.session)


def save_checkpoint(sess, g, model_dir):
    """Writes a checkpoint of the global variables (the centre, global_step) to `model_dir`
    from the chief's `MonitoredSession` `sess` and `graph.WorkerGraph` `g`.

    Returns:
        The checkpoint's path prefix.

    Raises:
        files.SaveError: if the save fails other than by a lost task (a full disk, a
            directory made read-only), naming the directory, the error and the checkpoint
            that is still the latest (TensorFlow writes the index file last).
    """
    prefix = os.path.join(model_dir, files.CHECKPOINT_PREFIX)
    with _save_errors(f"write a checkpoint to {model_dir}", model_dir, prefix):
        return g.saver.save(
            raw_session(sess), prefix, global_step=g.global_step, write_meta_graph=False
        )


def export_centre(sess, g, model_dir):
    """Saves the centre under the plain model's variable names (`swapping_saver`); returns
    the export's path prefix, `model_dir/export/centre`; raises as `save_checkpoint` does."""
    export_dir = os.path.join(model_dir, files.EXPORT_DIR)
    with _save_errors(f"export the centre to {export_dir}", model_dir):
        return g.export_saver.save(
            raw_session(sess),
            os.path.join(export_dir, files.EXPORT_PREFIX),
            write_meta_graph=False,
        )


@contextlib.contextmanager
def _save_errors(what, model_dir, prefix=None):
    """Turns a save's failure other than by a lost task into a `files.SaveError`: could not
    `what`, why, and the checkpoint that is still the latest. A lost parameter server's
    error goes on to the worker's recovery loop. With the checkpoints' `prefix`, the empty
    `<prefix>-<step>_temp*` directories a failed sharded save leaves are removed."""
    try:
        yield
    except (tf.errors.OpError, ValueError) as error:
        if is_recoverable_error(error):
            raise
        latest = tf.train.latest_checkpoint(model_dir)
        for path in tf.io.gfile.glob(prefix + "-*_temp*") if prefix else ():
            with contextlib.suppress(OSError):
                os.rmdir(path)  # Only if empty: a file in it is not ours to delete.
        raise files.SaveError(
            f"could not {what}: {save_error_reason(error)}; the latest checkpoint is still "
            f"{latest or '(none)'}."
        ) from error


def save_error_reason(error):
    """The gist of a failed save's error: e.g. `No space left on device (ResourceExhaustedError)`.

    TensorFlow's message is a graph execution error: the node, where it was defined, the
    task it came from, and then `<temporary file>; <what the OS said>`; that last part is
    what the user needs. Other errors give their first line that is not such context.
    """
    text = str(getattr(error, "message", error))
    match = _FILE_ERROR.search(text)
    if match:
        reason = match.group("reason")
    else:
        lines = [line.strip() for line in text.splitlines()]
        reason = next((line for line in lines if line and not line.startswith(_CONTEXT)), "")
    return f"{reason} ({type(error).__name__})" if reason else type(error).__name__


def evaluate_centre(sess, g, dataset):
    """Returns the accuracy and mean loss of the current centre on the test split."""
    centre = g.centre_eval
    result = models.evaluate(
        sess.run, centre.sums, centre.images, centre.labels, dataset.x_test, dataset.y_test
    )
    return float(result["accuracy"]), float(result["loss"])


def scalars_summary(values):
    """Returns a TensorBoard `Summary` proto with one scalar per item of `values`."""
    return tf.compat.v1.Summary(
        value=[tf.compat.v1.Summary.Value(tag=k, simple_value=v) for k, v in values.items()]
    )


def centre_digest(arrays_by_name):
    """Returns a SHA-256 hex digest of `{variable name: array}`: equal digests, equal values.

    E.g. of the centre as a session reads it (`WorkerGraph.centre_by_name()`) or a checkpoint.
    """
    digest = hashlib.sha256()
    for name in sorted(arrays_by_name):
        array = np.ascontiguousarray(arrays_by_name[name])
        digest.update(f"{name}:{array.dtype.str}:{array.shape}:".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def centre_placement(centres):
    """Which ps holds which of the global `centres`: `{"ps 0": [variable names], ...}`.

    The chief's "started" event reports it (`centre_ps`): each ps's part of the centre.
    """
    placement = {}
    for variable in centres:
        device = tf.DeviceSpec.from_string(variable.device)
        placement.setdefault(f"{device.job} {device.task}", []).append(variable.op.name)
    return {task: sorted(names) for task, names in sorted(placement.items())}


def write_job_summary(worker, outcome, state):
    """Evaluates the exported centre as a plain model and writes `summary.json`; returns it.

    From the chief's `worker.Worker`, its `finish.Outcome` and its `worker.TrainState`.
    """
    task, config, dataset = worker.task, worker.config, worker.dataset
    evaluation = models.evaluate_checkpoint(
        outcome.export_path, config.model, dataset.x_test, dataset.y_test, dataset.num_classes
    )
    return write_summary(
        task,
        config,
        dataset,
        evaluation,
        moving_rate=worker.g.optimizer.moving_rate,
        local_steps=outcome.local_steps,
        unfinished_workers=outcome.missing,
        exchanges=outcome.exchanges,
        chief_train_secs=state.train_secs,
        chief_steps_per_sec=state.steps_taken / max(state.train_secs, 1e-9),
        chief_recoveries=state.recoveries,
        chief_secs=time.monotonic() - worker.started_at,
        checkpoint=outcome.checkpoint,
        export=outcome.export_path,
    )


def write_summary(task, config, dataset, evaluation, **fields):
    """Writes `summary.json`: the job's settings, the evaluation of the exported centre and
    `fields` (what the chief measured); returns the dict written.

    Args:
        task: the chief's `cluster.TaskConfig`.
        config: the `TrainConfig` of the job.
        dataset: the `data.Dataset` evaluated on.
        evaluation: `{"accuracy", "loss"}` of the exported centre on the test split.
        **fields: the rest of the summary; `local_steps` (by worker), `checkpoint` and
            `export` among them.

    Raises:
        files.SaveError: if the file cannot be written.
    """
    summary = {
        "api": config.api,
        "test_accuracy": float(evaluation["accuracy"]),
        "test_loss": float(evaluation["loss"]),
        "test_examples": len(dataset.x_test),
        "dataset": os.path.basename(dataset.name),
        "model": config.model,
        "optimizer": config.optimizer,
        "learning_rate": config.learning_rate,
        "communication_period": config.communication_period,
        "moving_rate": config.moving_rate,
        "rho": config.rho,
        "synchronous": config.synchronous,
        "overlap": config.overlap,
        "wire_dtype": config.wire_dtype,
        "batch_size": config.batch_size,
        "seed": config.seed,
        "num_ps": task.num_ps,
        "num_workers": task.num_workers,
        "model_dir": config.model_dir,
        **fields,
    }
    summary["local_steps"] = dict(sorted(summary["local_steps"].items(), key=lambda i: int(i[0])))
    try:
        files.write_summary(config.model_dir, summary)
    except OSError as error:
        raise files.SaveError(
            f"could not write {files.summary_path(config.model_dir)}: {error.strerror or error}; "
            f"the checkpoint {summary['checkpoint']} and the export {summary['export']} are "
            "written."
        ) from error
    return summary
