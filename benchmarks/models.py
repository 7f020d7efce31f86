"""The benchmark models as `get_variable`s plus a forward pass, from a spec's JSON form.

Python 3.7 code for TensorFlow 1.15 and 2.x alike: contrib_task.py builds contrib's side
of the contrib section with it, task.py everything else. Keeping the parameters apart
from the forward pass lets one graph evaluate the network on other values (the centre).
"""

import numpy as np
import tensorflow as tf


def make_params(spec):
    """The variables of `spec` (`ModelSpec.as_json()`), in creation order: name -> var."""
    params = {}
    for name, shape in spec["shapes"]:
        if name.endswith("biases"):
            initializer = tf.compat.v1.zeros_initializer()
        else:
            initializer = tf.compat.v1.initializers.he_normal(seed=len(params))
        params[name] = tf.compat.v1.get_variable(name, shape, initializer=initializer)
    return params


def logits(spec, params, images):
    """The forward pass of `spec` with parameter values `params` (name -> tensor)."""

    def value(name):
        param = params[name]
        return param.read_value() if isinstance(param, tf.Variable) else param

    layers = spec["layers"]
    if spec["kind"] == "mlp":
        net = tf.reshape(images, [-1, int(np.prod(spec["input_shape"]))])
        for i in range(len(layers) + 1):
            net = tf.matmul(net, value(f"layer_{i}/weights"))
            net = net + value(f"layer_{i}/biases")
            if i < len(layers):
                net = tf.nn.relu(net)
        return net
    net = images
    for i in range(len(layers)):
        net = tf.nn.conv2d(net, value(f"conv_{i}/filters"), strides=1, padding="SAME")
        net = tf.nn.relu(net + value(f"conv_{i}/biases"))
        if i > 0:
            net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding="VALID")
    net = tf.reduce_mean(net, axis=[1, 2])
    return tf.matmul(net, value("logits/weights")) + value("logits/biases")


def loss(spec, params, images, labels):
    """Mean softmax cross-entropy of `spec` on a batch."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits(spec, params, images)
        )
    )
