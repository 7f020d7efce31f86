"""One task of an easgd-train job: a parameter server, or a worker training with EASGD.

`run` runs the task this process was given: `run_ps` serves the centre until the chief
says the job is done; a worker runs `worker.run_worker` (`keras_worker.run_worker` with
`--api=keras`), the chief after `check_checkpoints`. docs/DESIGN.md, "The trainer's task
lifecycle".
"""

import time

import tensorflow as tf

from tf_contrib_easgd import serve_until_done
from tf_contrib_easgd.trainer import checkpoints, worker
from tf_contrib_easgd.trainer.config import KERAS, UsageError


def run(task, config, reporter, started_at=None, rejoin=None):
    """Runs `task` until the job is done.

    Args:
        task: the `cluster.TaskConfig` of this process.
        config: the `config.TrainConfig` of the job.
        reporter: the `progress.Reporter` that prints this task's events.
        started_at: `time.monotonic()` when the process started (default: now).
        rejoin: for a worker, None or the process's own restart, which gives up a step
            stalled on a partition once the link is back (`stall.StallWatch`).

    Returns:
        For the chief, the summary dict also written to `summary.json`; otherwise None.

    Raises:
        UsageError: if the chief finds no checkpoint in `config.model_dir` that restores,
            though there are some (see `check_checkpoints`).
        files.SaveError: if the chief cannot write a checkpoint, the export or the summary.
        TimeoutError: if a wait on another task times out.
    """
    started_at = time.monotonic() if started_at is None else started_at
    if task.is_ps:
        run_ps(task, reporter)
        return None
    if task.is_chief:
        check_checkpoints(config.model_dir, reporter)
    if config.api == KERAS:
        from tf_contrib_easgd.trainer import keras_worker  # noqa: PLC0415 (loads Keras)

        return keras_worker.run_worker(task, config, reporter, started_at)
    return worker.run_worker(task, config, reporter, started_at, rejoin)


def check_checkpoints(model_dir, reporter):
    """Before the chief's server starts: makes sure its restore will find a good checkpoint,
    the newest good one before a bad latest (`checkpoints.fall_back`; a warning names both).

    Raises:
        UsageError: naming each bad file, when there are checkpoints but none restores (or
            the bad ones cannot be renamed).
    """
    choice = checkpoints.choose(model_dir, checkpoints.full_problem)
    if choice.ok:
        return
    if choice.restore is None:
        raise UsageError(choice.failure_message())
    try:
        renamed = checkpoints.fall_back(choice)
    except OSError as error:
        raise UsageError(choice.unmovable_message(error)) from None
    reporter.event("warning", message=choice.fallback_message(renamed))


def run_ps(task, reporter):
    """Serves the centre until the chief puts a token into this server's shutdown queue
    (no timeout: whoever started it stops it if the chief never finishes)."""
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
