"""In-process cluster tests: Keras layers and tf.Variable under the getter's
variable_creator_scope.

The tests of its other tiers are in tests/unit/test_keras_layers.py.
"""

import importlib
import importlib.util

import keras_flavours
import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope
from keras_flavours import KERAS_FLAVOURS

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

# The fixtures of keras_flavours, shared with tests/unit/test_keras_layers.py: the autouse
# skip of Keras 2 in TF1 mode, and `layers` of each Keras flavour.
_keras_2_stays_out_of_tf1_mode = keras_flavours.keras_2_stays_out_of_tf1_mode
layers = keras_flavours.layers


KERNELS = (
    np.linspace(-0.5, 0.5, 12, dtype=np.float32).reshape(4, 3),
    np.linspace(0.4, -0.4, 6, dtype=np.float32).reshape(3, 2),
)


BIASES = (np.array([0.1, -0.1, 0.05], np.float32), np.array([0.0, 0.2], np.float32))


STEPS = 6


def _keras_logits(layers, images):
    net = images
    for i, (kernel, bias) in enumerate(zip(KERNELS, BIASES, strict=True)):
        layer = layers.Dense(
            kernel.shape[1],
            activation="relu" if i == 0 else None,
            name=f"layer_{i}",
            kernel_initializer=tf.constant_initializer(kernel),
            bias_initializer=tf.constant_initializer(bias),
        )
        net = layer(net)
    return net


def _get_variable_logits(images):
    net = images
    for i, (kernel, bias) in enumerate(zip(KERNELS, BIASES, strict=True)):
        w = tf.compat.v1.get_variable(f"layer_{i}/kernel", initializer=kernel)
        b = tf.compat.v1.get_variable(f"layer_{i}/bias", initializer=bias)
        net = tf.matmul(net, w) + b
        net = tf.nn.relu(net) if i == 0 else net
    return net


class _Worker:
    """One worker's graph of the model, built with Keras layers or with get_variable."""

    def __init__(self, cluster, index, container, build):
        self.getter = ElasticAverageCustomGetter(f"/job:worker/task:{index}")
        self.graph = tf.Graph()
        with self.graph.as_default():
            with (
                worker_scope(cluster.spec, index, self.getter, container),
                self.getter.variable_creator_scope(),
            ):
                self.images = tf.compat.v1.placeholder(tf.float32, [None, 4])
                self.labels = tf.compat.v1.placeholder(tf.float32, [None, 2])
                loss = tf.reduce_mean(tf.square(build(self.images) - self.labels))
                step = tf.compat.v1.train.get_or_create_global_step()
                opt = ElasticAverageOptimizer(
                    tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
                    2,
                    self.getter,
                    communication_period=2,
                    moving_rate=0.25,
                    rho=0.05,
                )
                self.train_op = opt.minimize(loss, global_step=step)
                init = opt.get_init_op(index)
            entries = sorted(self.getter.centered_variables(), key=lambda e: e.worker.name)
            self.values = {
                e.worker.op.name: [
                    e.worker.value(),
                    e.local_center.value(),
                    e.global_center.value(),
                ]
                for e in entries
            }
            self.values["global_step"] = step.value()
            globals_init = tf.compat.v1.global_variables_initializer()
            locals_init = tf.compat.v1.local_variables_initializer()
        self.session = cluster.session(index, self.graph)
        if index == 0:
            self.session.run(globals_init)
        self.session.run([locals_init])
        self.session.run(init)

    def step(self, images, labels):
        self.session.run(self.train_op, {self.images: images, self.labels: labels})
        return self.session.run(self.values)


@pytest.mark.parametrize("flavour", KERAS_FLAVOURS)
def test_keras_and_get_variable_models_follow_the_same_trajectory(world, cluster, flavour):
    layers = importlib.import_module(flavour).layers
    rng = np.random.default_rng(7)
    batches = [
        (rng.normal(size=(8, 4)).astype(np.float32), rng.normal(size=(8, 2)).astype(np.float32))
        for _ in range(2 * STEPS)
    ]
    trajectories = {}
    for name, build in (
        ("keras", lambda images: _keras_logits(layers, images)),
        ("get_variable", _get_variable_logits),
    ):
        container = f"layers{name.replace('_', '')}{np.random.randint(1 << 30)}"
        workers = [_Worker(cluster, index, container, build) for index in (0, 1)]
        trajectories[name] = [
            workers[i % 2].step(*batches[i])
            for i in range(2 * STEPS)  # Steps 0 1 0 1 ...
        ]
        for worker in workers:
            worker.session.close()
    assert trajectories["keras"][0].keys() == trajectories["get_variable"][0].keys()
    assert trajectories["keras"][-1]["global_step"] == STEPS  # 2 x 6 local steps, tau 2.
    for keras_values, twin_values in zip(*trajectories.values(), strict=True):
        for name, values in keras_values.items():
            np.testing.assert_allclose(values, twin_values[name], rtol=1e-6, atol=1e-7)
    # The centre moved: the exchanges took place.
    first, last = trajectories["keras"][0], trajectories["keras"][-1]
    assert not np.allclose(first["layer_0/kernel"][2], last["layer_0/kernel"][2])
