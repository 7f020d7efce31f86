"""Which weights of a Keras model have a centre, and their centres' names.

Keras 3 and tf-keras alike: `averaged_weights` picks every floating-point weight once, with
Keras's own error for a model not built, and `centre_specs` names their centres by
position, as `ElasticAverageWorker` does, so that every worker names them alike.
"""

import tensorflow as tf

from tf_contrib_easgd.eager import variables


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


def centre_specs(weights):
    """A `CentreSpec` per weight, named by its position and short name ("weight_03_kernel"),
    as an `ElasticAverageWorker` names them (`eager.variables.centre_specs`)."""
    return variables.centre_specs(weights)
