"""The end of an easgd-train job, on the library's `WorkLedger` (job/ledger.py).

When a worker has its `--steps`, `finish` runs the ledger's protocol with the trainer's
events, its stall watch, and between the others' counts and the end of the job the chief's
final checkpoint and export. docs/DESIGN.md, "Work asked is work done", has the protocol.
"""

import dataclasses

from tf_contrib_easgd.trainer import export


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


def finish(sess, worker):
    """The ledger's `finish`, with the trainer's events, stall watch, final checkpoint and
    export.

    Returns:
        None if the ledger sent the worker back to training; else, on the chief, the
        `Outcome`, and elsewhere True.
    """
    g, task, config, reporter = worker.g, worker.task, worker.config, worker.reporter
    saved = {}

    def before_end():
        saved["checkpoint"] = export.save_checkpoint(sess, g, config.model_dir)
        saved["export_path"] = export.export_centre(sess, g, config.model_dir)
        saved["exchanges"] = int(sess.run(g.global_step))

    if not task.is_chief:
        reporter.event("waiting", what="the chief to end the job")
    elif task.num_workers > 1:
        reporter.event("waiting", what=f"{task.num_workers - 1} other worker(s) to finish")
    ended = g.ledger.finish(
        sess,
        config.timeout_secs,
        before_end=before_end,
        watch=worker.stall.step,
        warn=lambda message: reporter.event("warning", message=message),
    )
    if not ended:
        return None
    if not task.is_chief:
        return True
    finished = g.ledger.finished
    counts = {**finished.local_steps, task.task_index: g.ledger.step}
    return Outcome(
        local_steps={str(index): counts[index] for index in sorted(counts)},
        missing=finished.missing,
        **saved,
    )
