"""The swapping saver: a checkpoint of the centres under the original variables' names.

A plain model built without EASGD restores the trained centre from it with its default
Saver, and the EASGD graph restores such a checkpoint, centres included.
docs/DESIGN.md ("Checkpoints").
"""

import tensorflow as tf

from tf_contrib_easgd.custom_getter import flatten_partitions


def swapping_saver(getter, var_list=None, name="swapping_saver", **saver_kwargs):
    """Returns a Saver that writes each global centre under its variable's own name.

    Args:
        getter: the `ElasticAverageCustomGetter` the model was built with.
        var_list: variables to save; worker copies and centres are both saved as the
            centre under the original name, anything else under its own name. Defaults to
            every global variable and the saveable objects, as a default Saver would.
        name: name of the Saver.
        **saver_kwargs: passed on to `tf.compat.v1.train.Saver`.

    Returns:
        A `tf.compat.v1.train.Saver`.

    Raises:
        RuntimeError: if no variable was created through the getter yet.
        TypeError: if `var_list` is not a list, tuple or None.
    """
    centres = getter.global_centers_by_name()
    if not centres:
        raise RuntimeError(
            "swapping_saver() needs the EASGD variables: build the model under the "
            "ElasticAverageCustomGetter first."
        )
    if var_list is None:
        var_list = tf.compat.v1.global_variables() + tf.compat.v1.get_collection(
            tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS
        )
    elif not isinstance(var_list, list | tuple):
        raise TypeError(f"var_list must be a list, a tuple or None, got {var_list!r}.")
    to_save = _checkpoint_entries(var_list, centres, _original_names(getter, centres))
    return tf.compat.v1.train.Saver(var_list=to_save, name=name, **saver_kwargs)


def _original_names(getter, centres):
    """Maps the name of each centre (partition) and worker copy to its original name."""
    original_name = {}
    for name, parts in centres.items():
        for part in parts:
            original_name[part.name] = name
    for entry in getter.centered_variables():
        original_name[entry.worker.name] = original_name[entry.global_center.name]
    return original_name


def _checkpoint_entries(var_list, centres, original_name):
    """The Saver's `var_list` dict: checkpoint key -> variable, or list of slices."""
    to_save = {}
    for item in flatten_partitions(var_list):
        key = original_name.get(getattr(item, "name", None))
        if key is not None:
            parts = centres[key]
            to_save[key] = parts if len(parts) > 1 else parts[0]
        else:
            to_save.setdefault(_checkpoint_key(item), []).append(item)
    return {
        key: value[0] if isinstance(value, list) and len(value) == 1 else value
        for key, value in to_save.items()
    }


def _checkpoint_key(variable):
    """Returns the name a default Saver would store `variable` (or its slice) under."""
    # The slice information of a partition is what TF's own Saver reads; it has no public
    # accessor.
    slice_info = getattr(variable, "_save_slice_info", None)
    if slice_info is not None:
        return slice_info.full_name
    if isinstance(variable, tf.Variable):
        return variable.op.name
    return variable.name
