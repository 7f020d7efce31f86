"""Which weights of a Keras model have a centre, the variables that hold them, their names.

Keras 3 and tf-keras alike: `averaged_weights` picks every floating-point weight once,
`tf_variable` finds the `tf.Variable` behind each, and `centre_specs` names their centres.
"""

import re

import tensorflow as tf

from tf_contrib_easgd.keras.centre_link import CentreSpec

_INVALID_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9_.\-/]")


def averaged_weights(model):
    """The weights that get a centre: every floating-point one of `model.weights`, once."""
    try:
        every = model.weights
    except ValueError:  # Keras 2's "Weights for model ... have not yet been created".
        every = []
    weights, seen = [], set()
    for weight in every:
        if id(weight) not in seen and tf.as_dtype(weight.dtype).is_floating:
            seen.add(id(weight))
            weights.append(weight)
    if not weights:
        raise ValueError(
            f"model {getattr(model, 'name', model)!r} has no floating-point weights to "
            "average: build it before fit (give it an Input, or call model.build(input_shape))."
        )
    return weights


def tf_variable(weight):
    """The `tf.Variable` that holds `weight`: itself (tf-keras), or the one a Keras 3
    variable wraps (its `value` on the TensorFlow backend); else `weight` itself. Reads and
    updates go to it directly: Keras 3's own `assign_sub` reads, subtracts and assigns the
    whole variable again."""
    if isinstance(weight, tf.Variable):
        return weight
    value = getattr(weight, "value", None)
    return value if isinstance(value, tf.Variable) else weight


def centre_specs(weights):
    """A `CentreSpec` per weight, named after it (unique, as op names allow)."""
    specs, taken = [], set()
    for weight in weights:
        name = getattr(weight, "path", None) or weight.name.split(":")[0]
        name = _INVALID_NAME_CHARACTERS.sub("_", name)
        name = name if re.match(r"[A-Za-z0-9.]", name) else f"w{name}"
        unique, count = name, 1
        while unique in taken:
            unique, count = f"{name}_{count}", count + 1
        taken.add(unique)
        specs.append(CentreSpec(unique, tuple(weight.shape), tf.as_dtype(weight.dtype)))
    return specs
