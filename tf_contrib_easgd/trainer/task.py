"""One task of an easgd-train job: a parameter server, or a worker training with EASGD.

`run` runs the task this process was given: `run_ps` serves the centre until the chief
says the job is done; a worker runs `worker.run_worker`. See docs/DESIGN.md, "The trainer's
task lifecycle".
"""

import time

import tensorflow as tf

from tf_contrib_easgd import serve_until_done
from tf_contrib_easgd.trainer import worker


def run(task, config, reporter, started_at=None):
    """Runs `task` until the job is done.

    Args:
        task: the `cluster.TaskConfig` of this process.
        config: the `config.TrainConfig` of the job.
        reporter: the `progress.Reporter` that prints this task's events.
        started_at: `time.monotonic()` when the process started, for the timings.

    Returns:
        For the chief, the summary dict also written to `summary.json`; otherwise None.
    """
    started_at = time.monotonic() if started_at is None else started_at
    if task.is_ps:
        run_ps(task, reporter)
        return None
    return worker.run_worker(task, config, reporter, started_at)


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
