"""The restored centre against its checkpoint: the one part of the soak that needs TensorFlow.

After a ps restart the chief's "started" event gives the checkpoint it restored, its
`global_step` and a SHA-256 digest of the centre read right after the restore
(`tf_contrib_easgd.trainer.export.centre_digest`). The soak copies that checkpoint as soon
as the event arrives (the chief keeps only its last three) and compares it here, once the
job is over. TensorFlow is imported on the first call only.
"""

import glob
import os
import shutil


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
