"""The end of an easgd-train job, inside the workers' recovery loops.

When a worker has its `--steps`, the chief waits until the `WorkLedger` counts every
other worker's steps, writes the final checkpoint and export, ends the job and waits for
the others to see that; another worker waits for that end. Either goes back to training
when a new session finds its count lower (a parameter server restored from a checkpoint).
docs/DESIGN.md, "Work asked is work done", has the protocol.
"""

import dataclasses
import time

from tf_contrib_easgd.trainer import export

#: How often the chief reads the ledger on ps 0 while it waits, and a finished worker at
#: least.
POLL_SECS = 0.2
#: The most polls per second that the finished workers of a job make on ps 0 together:
#: with many workers each polls less often (`waiting_poll_secs`). One poll took ~0.7 ms
#: of ps 0's CPU with 64 workers polling (docs/SCALING.md); at 0.2 s each, 64 finished
#: workers took a fifth of a core from the stragglers' exchanges.
MAX_WAITING_POLLS_PER_SEC = 50.0
#: How long the chief waits for the finished workers to see the end of the job.
ACKNOWLEDGE_SECS = 30.0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the chief's last session leaves for the summary.

    Attributes:
        local_steps: `{str(task_index): local steps}` of every worker, as the ledger counts
            them (fewer than `--steps` for a worker that did not finish).
        missing: the task indices of the workers that did not finish in time.
        checkpoint: the path prefix of the final checkpoint.
        export_path: the path prefix of the exported centre.
        exchanges: `global_step` at the end, the number of exchanges of all workers.
    """

    local_steps: dict
    missing: list
    checkpoint: str
    export_path: str
    exchanges: int


def finish_as_chief(sess, worker, state):
    """Waits for the other workers' steps, then checkpoints, exports and ends the job.

    Args:
        sess: the chief's `MonitoredSession`.
        worker: the chief's `worker.Worker`.
        state: its `worker.TrainState`; a new session may lower `state.step`.

    Returns:
        The `Outcome`, or None if a new session sent the chief back to training.
    """
    g, task, config, reporter = worker.g, worker.task, worker.config, worker.reporter
    others = [index for index in range(task.num_workers) if index != task.task_index]
    if others:
        reporter.event("waiting", what=f"{len(others)} other worker(s) to finish")
    deadline = time.monotonic() + config.timeout_secs
    while True:
        with worker.stall.step(state.step):
            steps = g.ledger.all_steps(sess)
        if state.step < config.steps:
            return None
        missing = [index for index in others if steps[index] < config.steps]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(POLL_SECS)
    if missing:
        reporter.event(
            "warning",
            message=f"workers {missing} did not finish within {config.timeout_secs:g} s; "
            "exporting the centre as it is",
        )
    checkpoint = export.save_checkpoint(sess, g, config.model_dir)
    export_path = export.export_centre(sess, g, config.model_dir)
    exchanges = int(sess.run(g.global_step))
    g.ledger.end_job(sess)
    _wait_for_acknowledgements(sess, worker, [i for i in others if i not in missing])
    local_steps = {str(index): count for index, count in enumerate(steps)}
    local_steps[str(task.task_index)] = state.step
    return Outcome(local_steps, missing, checkpoint, export_path, exchanges)


def _wait_for_acknowledgements(sess, worker, finished):
    """Waits until the `finished` workers have seen the end (`ACKNOWLEDGE_SECS` at most)."""
    deadline = time.monotonic() + ACKNOWLEDGE_SECS
    while True:
        _, _, acknowledged = worker.g.ledger.read(sess)
        unaware = [index for index in finished if not acknowledged[index]]
        if not unaware:
            return
        if time.monotonic() > deadline:
            worker.reporter.event(
                "warning",
                message=f"workers {unaware} did not see the end of the job within "
                f"{ACKNOWLEDGE_SECS:g} s; stopping the parameter servers",
            )
            return
        time.sleep(POLL_SECS)


def waiting_poll_secs(num_workers):
    """How often each finished worker of a `num_workers`-worker job polls for its end:
    `POLL_SECS`, or less often where their polls together would exceed
    `MAX_WAITING_POLLS_PER_SEC`."""
    return max(POLL_SECS, num_workers / MAX_WAITING_POLLS_PER_SEC)


def wait_for_end(sess, worker, state):
    """On a worker other than the chief: waits until the chief ends the job.

    It gives up, with a warning, when the chief's count of steps has not changed for twice
    `--timeout_secs` (the chief waits `--timeout_secs` for the others, then exports).

    Args:
        sess: the worker's `MonitoredSession`.
        worker: the `worker.Worker`.
        state: its `worker.TrainState`; a new session may lower `state.step`.

    Returns:
        True once the job is over, False if a new session sent the worker back to training.
    """
    g, config, reporter = worker.g, worker.config, worker.reporter
    reporter.event("waiting", what="the chief to end the job")
    patience = 2 * config.timeout_secs
    poll_secs = waiting_poll_secs(worker.task.num_workers)
    chief_steps, changed = None, time.monotonic()
    while True:
        with worker.stall.step(state.step):
            chief_now, done = g.ledger.end_state(sess)
        if state.step < config.steps:
            return False
        if done:
            with worker.stall.step(state.step):
                g.ledger.acknowledge(sess)
            return True
        if chief_now != chief_steps:
            chief_steps, changed = chief_now, time.monotonic()
        elif time.monotonic() - changed > patience:
            reporter.event(
                "warning",
                message=f"the chief's steps stayed at {chief_steps} for {patience:g} s; "
                "leaving the job, whose ledger holds this worker's steps",
            )
            return True
        time.sleep(poll_secs)
