"""The restored centre against its checkpoints: the one part of the soak that needs TensorFlow.

After a ps restart the chief's "started" event gives the checkpoint it restored, its
`global_step`, a SHA-256 digest of the centre read right after the restore
(`tf_contrib_easgd.trainer.export.centre_digest`) and which ps holds which centre. The
soak copies that checkpoint as soon as the event arrives (the chief keeps only its last
three), and the first newer one the chief writes; here, once the job is over, it compares
the first with the event and, per ps, the second with the first: whether each ps's part
of the centre trained on after the restore. TensorFlow is imported on the first call only.
"""

import glob
import os
import shutil

import numpy as np

from tf_contrib_easgd.trainer import checkpoints


def copy_checkpoint(model_dir, name, into):
    """Copies the files of checkpoint `name` (e.g. `model.ckpt-80`) of `model_dir` to `into`.

    Returns:
        The path prefix of the copy, or None if the checkpoint's files are gone.
    """
    files = glob.glob(os.path.join(model_dir, glob.escape(name) + ".*"))
    if not files:
        return None
    os.makedirs(into, exist_ok=True)
    for path in files:
        shutil.copy2(path, into)
    return os.path.join(into, name)


def newer_checkpoint(model_dir, than):
    """The latest checkpoint of `model_dir` if its step is above `than`'s, else None.

    Args:
        model_dir: the job's `--model_dir`.
        than: a checkpoint's name, e.g. `model.ckpt-80`.

    Returns:
        The latest checkpoint's name (the index file `checkpoint` names it once its files
        are written), or None if there is none newer, or the index file cannot be read.
    """
    try:
        state = checkpoints.read_state(model_dir)
    except ValueError:
        return None  # Being replaced: the next look reads it.
    if state is None or state[0] is None:
        return None
    step, since = checkpoints.checkpoint_step(state[0]), checkpoints.checkpoint_step(than)
    if step is None or since is None or step <= since:
        return None
    return os.path.basename(state[0])


def moves_by_ps(restored, later, placement):
    """How each ps's centres changed from one checkpoint to a later one.

    Args:
        restored: the path prefix of the checkpoint the chief restored (a copy), or None.
        later: the path prefix of a later checkpoint (a copy), or None.
        placement: `{"ps 0": [centre variable names], ...}`, the chief's `centre_ps`.

    Returns:
        `{ps: {"variables": n, "moved": how many differ, "max_change": the largest
        absolute change of any element}}`, or `{"error": why}` if a checkpoint is missing
        or lacks a centre variable of `placement`.
    """
    if restored is None or later is None:
        return {"error": "no checkpoint newer than the restored one was copied"}
    import tensorflow as tf  # noqa: PLC0415 - only the end of a soak needs it.

    before, after = tf.train.load_checkpoint(restored), tf.train.load_checkpoint(later)
    moves = {}
    for ps, names in sorted(placement.items()):
        moved, largest = 0, 0.0
        for name in names:
            if not (before.has_tensor(name) and after.has_tensor(name)):
                return {"error": f"{name} of {ps} is not in both checkpoints"}
            change = np.abs(after.get_tensor(name) - before.get_tensor(name))
            moved += int(change.max(initial=0.0) > 0)
            largest = max(largest, float(change.max(initial=0.0)))
        moves[ps] = {"variables": len(names), "moved": moved, "max_change": largest}
    return moves


def compare(prefix, started):
    """Compares a copied checkpoint with the chief's "started" event after its restore.

    Args:
        prefix: the checkpoint's path prefix (`copy_checkpoint`), or None.
        started: the event: `restored_global_step`, `restored_centre_sha256`.

    Returns:
        `{"ok": bool, "detail": str}`: equal when the checkpoint's `global_step` and the
        digest of its centre variables are those of the event.
    """
    if prefix is None:
        return {"ok": False, "detail": "the checkpoint's files were gone before the copy"}
    import tensorflow as tf  # noqa: PLC0415 - only the end of a soak needs it.

    from tf_contrib_easgd import GLOBAL_VARIABLE_NAME  # noqa: PLC0415
    from tf_contrib_easgd.trainer import export  # noqa: PLC0415

    reader = tf.train.load_checkpoint(prefix)
    centres = {
        name: reader.get_tensor(name)
        for name in reader.get_variable_to_shape_map()
        if name.startswith(GLOBAL_VARIABLE_NAME + "/")
    }
    step = int(reader.get_tensor("global_step"))
    digest = export.centre_digest(centres)
    ok = bool(centres) and digest == started["restored_centre_sha256"]
    ok = ok and step == started["restored_global_step"]
    return {
        "ok": ok,
        "detail": f"{len(centres)} centre variables, global_step {step} (event: "
        f"{started['restored_global_step']}), sha256 {digest[:12]} (event: "
        f"{started['restored_centre_sha256'][:12]})",
    }


class Restores:
    """The chief's restores during a soak, and the copies of their checkpoints.

    For each "started" event of the chief that restored a checkpoint, the soak keeps a copy
    of that checkpoint and, once the chief has written a newer one, a copy of the first
    newer one: what every ps's part of the centre became after the restore.

    Args:
        model_dir: the job's `--model_dir`.
        into: where the copies go: `<n>/` and `<n>-later/` for the n-th restore.
    """

    def __init__(self, model_dir, into):
        self.model_dir = model_dir
        self.into = into
        self.restores = []  # {"started": event, "prefix": copy, "later": copy or None}

    def add(self, started):
        """Copies the checkpoint restored before the chief's "started" event `started`."""
        into = os.path.join(self.into, str(len(self.restores)))
        prefix = copy_checkpoint(self.model_dir, started["restored_from"], into)
        self.restores.append({"started": started, "prefix": prefix, "later": None})

    def copy_later(self):
        """Copies, for each restore without one yet, the chief's first newer checkpoint."""
        for number, restore in enumerate(self.restores):
            if restore["later"] is not None:
                continue
            name = newer_checkpoint(self.model_dir, restore["started"]["restored_from"])
            if name is not None:
                into = os.path.join(self.into, f"{number}-later")
                restore["later"] = copy_checkpoint(self.model_dir, name, into)

    def assess_after(self, ended):
        """The first restore later than `ended` against its checkpoint and the next one.

        Returns:
            `{"digest": compare(...), "moves": moves_by_ps(...)}`, both None if the chief
            restored nothing after `ended`. A restore without a copy of a newer checkpoint
            is compared with the latest of `model_dir` (the job's final one), if newer.
        """
        for restore in self.restores:
            started = restore["started"]
            if started["time"] > ended:
                later = restore["later"]
                if later is None:
                    name = newer_checkpoint(self.model_dir, started["restored_from"])
                    later = name and os.path.join(self.model_dir, name)
                placement = started.get("centre_ps", {})
                return {
                    "digest": compare(restore["prefix"], started),
                    "moves": moves_by_ps(restore["prefix"], later, placement),
                }
        return {"digest": None, "moves": None}
