"""The benchmark models, as variables made with `tf.compat.v1.get_variable` plus a forward pass.

Keeping the parameters apart from the forward pass lets one graph evaluate the same network
on other values of its parameters (the EASGD centre, for time to accuracy) without a second
set of variables.
"""

import dataclasses
import math

import numpy as np
import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A classifier: its input, its layers and the batch it trains on.

    Attributes:
        name: short name used in tables and flags.
        kind: "mlp" or "cnn".
        input_shape: shape of one example.
        layers: hidden layer widths (mlp) or convolution channels (cnn).
        num_classes: number of outputs.
        batch_size: examples per local step.
    """

    name: str
    kind: str
    input_shape: tuple
    layers: tuple
    num_classes: int
    batch_size: int

    def shapes(self):
        """Maps each variable name to its shape, in creation order."""
        shapes = {}
        if self.kind == "mlp":
            widths = (math.prod(self.input_shape), *self.layers, self.num_classes)
            for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:], strict=False)):
                shapes[f"layer_{i}/weights"] = (fan_in, fan_out)
                shapes[f"layer_{i}/biases"] = (fan_out,)
            return shapes
        channels = (self.input_shape[-1], *self.layers)
        for i, (fan_in, fan_out) in enumerate(zip(channels, channels[1:], strict=False)):
            shapes[f"conv_{i}/filters"] = (3, 3, fan_in, fan_out)
            shapes[f"conv_{i}/biases"] = (fan_out,)
        shapes["logits/weights"] = (channels[-1], self.num_classes)
        shapes["logits/biases"] = (self.num_classes,)
        return shapes

    @property
    def num_params(self):
        """Number of trainable scalars."""
        return sum(math.prod(shape) for shape in self.shapes().values())


#: Communication-heavy: 2.9 M parameters, little compute per parameter (784-1024x3-10 MLP).
COMM_MLP = ModelSpec("mlp-2.9M", "mlp", (784,), (1024, 1024, 1024), 10, 64)
#: Compute-heavy: 0.1 M parameters, three 3x3 convolutions on 32x32x3 images.
COMPUTE_CNN = ModelSpec("cnn-0.1M", "cnn", (32, 32, 3), (32, 64, 128), 10, 16)
#: The time-to-accuracy model: the communication-heavy MLP shape on 8x8 digits (2.2 M).
DIGITS_MLP = ModelSpec("digits-mlp-2.2M", "mlp", (64,), (1024, 1024, 1024), 10, 32)

#: A tiny model (25 K parameters), where a fixed cost per step weighs most.
TINY_MLP = ModelSpec("mlp-25K", "mlp", (784,), (32,), 10, 64)

MODELS = {spec.name: spec for spec in (COMM_MLP, COMPUTE_CNN, DIGITS_MLP, TINY_MLP)}
#: The models of the per-step overhead section.
OVERHEAD = (COMM_MLP, COMPUTE_CNN, TINY_MLP)


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


def synthetic_batch(spec, seed=0):
    """A fixed random batch for throughput runs: (images, labels) as numpy arrays."""
    rng = np.random.default_rng(seed)
    images = rng.random((spec.batch_size, *spec.input_shape), dtype=np.float32)
    labels = rng.integers(0, spec.num_classes, spec.batch_size).astype(np.int32)
    return images, labels
