"""The files of an easgd-train job in `--model_dir`, and their atomic writes.

    model.ckpt-<global_step>.*   the chief's checkpoints of the centre and global_step
    *.unusable                   a checkpoint that does not restore, moved aside (`checkpoints`)
    export/centre.*              the centre under the plain model's variable names
    worker_<i>/                  TensorBoard events of worker i
    summary.json                 the chief's result (local mode adds `wall_secs`)
    logs/                        local mode: each task's output

No TensorFlow here: the local launcher completes the summary (`runner.local`).
"""

import json
import os

SUMMARY_FILE = "summary.json"
EXPORT_DIR = "export"
EXPORT_PREFIX = "centre"
CHECKPOINT_PREFIX = "model.ckpt"
LOGS_DIR = "logs"


class SaveError(OSError):
    """The chief could not write a checkpoint, the export or the summary; the message says
    where, why, and which checkpoint is still the latest."""


def events_dir(model_dir, task_index):
    """The directory of worker `task_index`'s TensorBoard events."""
    return os.path.join(model_dir, f"worker_{task_index}")


def summary_path(model_dir):
    """The path of `summary.json` in `model_dir`."""
    return os.path.join(model_dir, SUMMARY_FILE)


def write_summary(model_dir, summary):
    """Writes `summary` as JSON to `model_dir/summary.json` (`write_atomically`)."""
    write_atomically(summary_path(model_dir), json.dumps(summary, indent=2, sort_keys=True) + "\n")


def write_atomically(path, text):
    """Writes `text` to `path.partial`, which then replaces `path`: a reader sees the old
    file or the new one, never a part."""
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(partial, path)
