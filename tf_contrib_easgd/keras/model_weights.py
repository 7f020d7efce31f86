"""Which weights of a Keras model have a centre, the variables that hold them, their names.

Keras 3 and tf-keras alike: `averaged_weights` picks every floating-point weight once,
`tf_variable` finds the `tf.Variable` behind each, and `centre_specs` names their centres
by position, so that every worker names them alike.
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
    """A `CentreSpec` per weight, named by its position and short name ("weight_03_kernel").

    Not by its path: Keras numbers unnamed layers and models per process ("dense",
    "dense_1", ...), so a worker that built another model first would give the same weight
    another path than the chief's, and wait for centres nobody makes. Workers train the
    same architecture, so positions agree.
    """
    width = len(str(len(weights) - 1))
    specs = []
    for index, weight in enumerate(weights):
        path = getattr(weight, "path", None) or weight.name.split(":")[0]
        short = _INVALID_NAME_CHARACTERS.sub("_", path.rsplit("/", 1)[-1])
        name = f"weight_{index:0{width}d}_{short}"
        specs.append(CentreSpec(name, tuple(weight.shape), tf.as_dtype(weight.dtype)))
    return specs
