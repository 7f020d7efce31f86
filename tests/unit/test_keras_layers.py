"""Keras layers and tf.Variable under the getter's variable_creator_scope (issue 29, part 1).

TF1 scripts built models with `tf.keras.layers` inside the getter's `variable_scope`; Keras
makes its variables without calling a custom getter, so contrib never averaged them. Inside
`getter.variable_creator_scope()` they get their worker copy and centres by the getter's own
code. tf-keras (Keras 2, what TF1 scripts had) is imported as `tf_keras` here, beside Keras 3:
neither needs TF_USE_LEGACY_KERAS when named directly.
"""

import gc
import importlib
import importlib.util

import keras_flavours
import numpy as np
import pytest
import tensorflow as tf
from keras_flavours import KERAS_3

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

WORKER = "/job:worker/task:1"


CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222", "w1:2222"]})


LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES


GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES


# The fixtures of keras_flavours, shared with tests/cluster/test_keras_layers_cluster.py:
# the autouse skip of Keras 2 in TF1 mode, and `layers` of each Keras flavour.
_keras_2_stays_out_of_tf1_mode = keras_flavours.keras_2_stays_out_of_tf1_mode
layers = keras_flavours.layers


def _names(key):
    return sorted(v.op.name for v in tf.compat.v1.get_collection(key))


def _model_scopes(getter, cluster_spec=CLUSTER, worker=WORKER):
    setter = tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster_spec)
    return (
        tf.compat.v1.device(setter),
        tf.compat.v1.variable_scope("", custom_getter=getter),
        getter.variable_creator_scope(),
    )


def test_keras_variables_get_a_worker_copy_and_two_centres(world, layers):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope, creator = _model_scopes(getter)
        with device, scope, creator:
            x = tf.compat.v1.placeholder(tf.float32, [None, 4])
            layer = layers.Dense(3, name="hidden")
            layer(x)
        # The layer holds the worker copies (Keras 3 wraps them in its own variables),
        # named as the layer named them.
        kernel, bias = tf.compat.v1.trainable_variables()
        assert [kernel.name, bias.name] == ["hidden/kernel:0", "hidden/bias:0"]
        held = layer.kernel if isinstance(layer.kernel, tf.Variable) else layer.kernel.value
        assert held is kernel
        assert _names(GLOBAL) == [
            "global_center_variable/hidden/bias",
            "global_center_variable/hidden/kernel",
        ]
        assert _names(LOCAL) == [
            "hidden/bias",
            "hidden/kernel",
            "local_center_variable/hidden/bias",
            "local_center_variable/hidden/kernel",
        ]
        entries = getter.centered_variables()
        assert [getter.find(v).worker for v in (kernel, bias)] == [e.worker for e in entries]
        # Devices as for get_variable: copies and local centres on the worker, the centres
        # round-robin on the parameter servers.
        assert {e.worker.device for e in entries} == {WORKER}
        assert {e.local_center.device for e in entries} == {WORKER}
        assert sorted(e.global_center.device for e in entries) == [
            "/job:ps/task:0",
            "/job:ps/task:1",
        ]


def test_tf_variable_gets_centres_and_non_trainable_variables_pass(world):
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope, creator = _model_scopes(getter)
        with device, scope, creator, tf.compat.v1.variable_scope("net"):
            weights = tf.compat.v1.Variable(tf.zeros([2, 2]), name="weights")
            counter = tf.compat.v1.Variable(0, trainable=False, name="counter")
            local = tf.compat.v1.Variable(
                0.0, trainable=False, collections=[LOCAL], name="local_count"
            )
        assert getter.find(weights).global_center.op.name == "global_center_variable/net/weights"
        assert [e.worker for e in getter.centered_variables()] == [weights]
        # The centre took ps 0; the counter is the next variable the setter places.
        assert counter.device == "/job:ps/task:1" and counter.op.name == "net/counter"
        assert local.device == WORKER  # As the getter places local variables.


def test_get_variable_still_goes_through_the_getter_alone(world):
    # Inside the creator scope, get_variable's variables are made once, by the getter.
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope, creator = _model_scopes(getter)
        with device, scope, creator:
            w = tf.compat.v1.get_variable("w", [2])
        assert [e.worker for e in getter.centered_variables()] == [w]
        assert len(tf.compat.v1.global_variables()) == 1
        assert len(tf.compat.v1.local_variables()) == 2


def test_the_optimizer_refuses_keras_variables_made_outside_the_scope_and_says_why(world):
    layers = importlib.import_module("keras").layers
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default():
        device, scope, _ = _model_scopes(getter)
        with device, scope:
            logits = layers.Dense(2, name="outside")(tf.compat.v1.placeholder(tf.float32, [1, 3]))
            optimizer = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, rho=0.0
            )
            with pytest.raises(ValueError, match=r"'outside/kernel:0' was not created") as caught:
                optimizer.minimize(tf.reduce_sum(logits))
    assert "Keras layers and tf.Variable do not" in str(caught.value)
    assert "getter.variable_creator_scope()" in str(caught.value)


def test_the_creator_scope_is_graph_mode_only():
    getter = ElasticAverageCustomGetter("")
    with pytest.raises(ValueError, match=r"variable_creator_scope\(\) works in graph mode"):
        getter.variable_creator_scope()


def test_swapping_saver_gives_a_plain_keras_model_the_centre(world, layers, tmp_path):
    # One worker, no parameter server (the centres unplaced): lr 1 on the layer's output for
    # x = [1, 1], k1 + k2 + b (gradient 1 for each), tau 2, alpha 0.5. All start at 0.1;
    # two local steps take the copy to -1.9, then d = 0.5 * (-1.9 - 0.1) = -1.0: copy
    # -0.9, centre -0.9. A third step moves only the copy, to -1.9: the checkpoint must
    # hold the centre, -0.9.
    getter = ElasticAverageCustomGetter("")
    initial = tf.constant_initializer(0.1)
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter), getter.variable_creator_scope():
            layer = layers.Dense(
                1, name="dense", kernel_initializer=initial, bias_initializer=initial
            )
            loss = tf.reduce_sum(layer(tf.ones([1, 2])))
            step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
                communication_period=2, moving_rate=0.5, rho=0.0,
            )  # fmt: skip
            train_op = opt.minimize(loss, global_step=step)
        saver = opt.swapping_saver()
        copies = tf.compat.v1.trainable_variables()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            for _ in range(3):
                session.run(train_op)
            kernel, bias = session.run(copies)
            np.testing.assert_allclose(np.concatenate([kernel[:, 0], bias]), [-1.9] * 3, 1e-6)
            path = saver.save(session, str(tmp_path / "centre"))
    with tf.Graph().as_default():  # A plain model: Keras layers, no getter, default Saver.
        plain = layers.Dense(1, name="dense")
        plain(tf.ones([1, 2]))
        with tf.compat.v1.Session() as session:
            tf.compat.v1.train.Saver().restore(session, path)
            kernel, bias = session.run(tf.compat.v1.global_variables()[:2])
    np.testing.assert_allclose(kernel, [[-0.9], [-0.9]], rtol=1e-6)
    np.testing.assert_allclose(bias, [-0.9], rtol=1e-6)


# --- Layer types ----------------------------------------------------------------------------
# One training step of each layer type under the getter's scope (docs/KERAS.md lists them):
# every trainable weight gets a centre and the step runs.
LAYER_TYPES = {
    "Dense": (lambda layers: layers.Dense(3), [2, 4], 2),
    "Conv2D": (lambda layers: layers.Conv2D(2, 3), [2, 5, 5, 1], 2),
    "BatchNormalization": (lambda layers: layers.BatchNormalization(), [2, 4], 2),
    "LayerNormalization": (lambda layers: layers.LayerNormalization(), [2, 4], 2),
    "Embedding": (lambda layers: layers.Embedding(10, 3), [2, 3], 1),
    "LSTM": (lambda layers: layers.LSTM(2), [2, 4, 3], 3),
    "GRU": (lambda layers: layers.GRU(2), [2, 4, 3], 3),
    "MultiHeadAttention": (None, [2, 3, 4], 8),
}


def _train_one_step(layers, layer_type):
    make, shape, weights = LAYER_TYPES[layer_type]
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter), getter.variable_creator_scope():
            dtype = tf.int32 if layer_type == "Embedding" else tf.float32
            x = tf.ones(shape, dtype)
            if make is None:
                y = layers.MultiHeadAttention(num_heads=2, key_dim=2)(x, x)
            else:
                y = make(layers)(x)
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, rho=0.0
            )
            train_op = opt.minimize(tf.reduce_sum(y))
            init = opt.get_init_op(0)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(init)
            session.run(train_op)
    assert len(getter.centered_variables()) == weights


@pytest.mark.parametrize("layer_type", list(LAYER_TYPES))
def test_layer_types_train_under_the_getter(world, layers, layer_type):
    recurrent = layer_type in ("LSTM", "GRU")
    if world == "tf1" and KERAS_3 and layers.__name__.startswith("keras.") and recurrent:
        pytest.skip("Keras 3 refuses its recurrent layers in TF1 mode: the test below")
    _train_one_step(layers, layer_type)


@pytest.mark.skipif(not KERAS_3, reason="Keras 2 runs its recurrent layers in TF1 mode")
@pytest.mark.parametrize(
    ("layer_type", "error", "message"),
    [
        ("LSTM", tf.errors.InvalidArgumentError, "TensorArrayWrite"),
        ("GRU", ValueError, "Attempting to slice scalar input"),
    ],
)
def test_keras_3_recurrent_layers_refuse_tf1_mode_on_their_own(layer_type, error, message):
    # Without EASGD too: Keras 3's while loop does not run on TF1's control flow. TF1
    # scripts use tf-keras, whose recurrent layers run (above).
    tf.compat.v1.disable_v2_behavior()
    try:
        with tf.Graph().as_default(), pytest.raises(error, match=message):
            y = getattr(importlib.import_module("keras").layers, layer_type)(2)(tf.ones([2, 4, 3]))
            with tf.compat.v1.Session() as session:
                session.run(tf.compat.v1.global_variables_initializer())
                session.run(y)
    finally:
        tf.compat.v1.reset_default_graph()
        tf.compat.v1.enable_v2_behavior()
        # TensorFlow logs the failed loop's unused TensorArray when it is collected:
        # collected here, its ERROR line goes to this test's captured output.
        gc.collect()
