"""The benchmark models, as variables made with `tf.compat.v1.get_variable` plus a forward pass.

Keeping the parameters apart from the forward pass lets one graph evaluate the same network
on other values of its parameters (the EASGD centre, for time to accuracy) without a second
set of variables.
"""

import math

import tensorflow as tf

from benchmarks.specs import (  # noqa: F401 - re-exported: models.COMM_MLP etc.
    COMM_MLP,
    COMPUTE_CNN,
    DIGITS_MLP,
    MODELS,
    OVERHEAD,
    TINY_MLP,
    ModelSpec,
    synthetic_batch,
)


def make_params(spec):
    """Creates the variables of `spec` with `tf.compat.v1.get_variable`; returns name -> var."""
    params = {}
    for name, shape in spec.shapes().items():
        if name.endswith("biases"):
            initializer = tf.compat.v1.zeros_initializer()
        else:
            initializer = tf.compat.v1.initializers.he_normal(seed=len(params))
        params[name] = tf.compat.v1.get_variable(name, shape, initializer=initializer)
    return params


def logits(spec, params, images):
    """The forward pass of `spec` on `images` with parameter values `params` (name -> tensor)."""

    def value(name):
        param = params[name]
        return param.read_value() if isinstance(param, tf.Variable) else param

    if spec.kind == "mlp":
        net = tf.reshape(images, [-1, math.prod(spec.input_shape)])
        for i in range(len(spec.layers) + 1):
            net = tf.matmul(net, value(f"layer_{i}/weights")) + value(f"layer_{i}/biases")
            if i < len(spec.layers):
                net = tf.nn.relu(net)
        return net
    net = images
    for i in range(len(spec.layers)):
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
