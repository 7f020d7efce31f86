"""Tests of tf_contrib_easgd.trainer.models: the MLP and CNN, and evaluating a saved plain model."""

import numpy as np
import pytest
import tensorflow as tf

from tf_contrib_easgd import (
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
)
from tf_contrib_easgd.trainer import models

MLP_VARIABLES = {
    "mlp/hidden_0/kernel": (64, 128),
    "mlp/hidden_0/bias": (128,),
    "mlp/logits/kernel": (128, 10),
    "mlp/logits/bias": (10,),
}
# 8x8 -> pool -> 4x4 -> pool -> 2x2, with 32 channels: 128 features into the dense layer.
CNN_VARIABLES = {
    "cnn/conv_0/kernel": (3, 3, 1, 16),
    "cnn/conv_0/bias": (16,),
    "cnn/conv_1/kernel": (3, 3, 16, 32),
    "cnn/conv_1/bias": (32,),
    "cnn/dense/kernel": (128, 64),
    "cnn/dense/bias": (64,),
    "cnn/logits/kernel": (64, 10),
    "cnn/logits/bias": (10,),
}


def _variables(graph):
    return {v.op.name: tuple(v.shape.as_list()) for v in graph.get_collection("variables")}


@pytest.mark.parametrize(("name", "expected"), [("mlp", MLP_VARIABLES), ("cnn", CNN_VARIABLES)])
def test_models_make_named_variables_and_logits(name, expected):
    with tf.Graph().as_default() as graph:
        images = tf.compat.v1.placeholder(tf.float32, [None, 8, 8, 1])
        logits = models.build_model(name, images, 10)
        assert logits.shape.as_list() == [None, 10]
        assert _variables(graph) == expected
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            out = session.run(logits, {images: np.zeros((3, 8, 8, 1), np.float32)})
    assert out.shape == (3, 10)


def test_cnn_takes_mnist_sized_images():
    with tf.Graph().as_default():
        logits = models.build_model("cnn", tf.zeros([2, 28, 28, 1]), 10)
    assert logits.shape.as_list() == [2, 10]


def test_models_are_built_through_get_variable_so_the_easgd_getter_applies():
    # Each variable gets its worker copy (LOCAL_VARIABLES) and the two centres.
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("/job:worker/task:0")
        with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), custom_getter=getter):
            models.build_model("mlp", tf.zeros([1, 8, 8, 1]), 10)
        global_names = {v.op.name for v in tf.compat.v1.global_variables()}
        local_names = {v.op.name for v in tf.compat.v1.local_variables()}
    assert global_names == {f"{GLOBAL_VARIABLE_NAME}/{name}" for name in MLP_VARIABLES}
    assert local_names == set(MLP_VARIABLES) | {
        f"{LOCAL_VARIABLE_NAME}/{name}" for name in MLP_VARIABLES
    }
    assert len(getter.centered_variables()) == 4
    assert graph.get_collection("trainable_variables")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("rnn", [1, 8, 8, 1], 10), r"name must be one of \['mlp', 'cnn'\], got 'rnn'"),
        (("mlp", [1, 8, 8, 1], 1), "num_classes must be >= 2, got 1"),
        (("mlp", [1, 64], 10), r"images must have the static shape .* got \(1, 64\)"),
    ],
)
def test_build_model_rejects_bad_arguments(args, message):
    name, shape, num_classes = args
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        models.build_model(name, tf.zeros(shape), num_classes)


def _save_plain_mlp(path, kernel_scale):
    """Saves a plain MLP whose logits are `kernel_scale` * (first 10 pixels): the label
    with the largest of those pixels wins."""
    with tf.Graph().as_default():
        models.build_model("mlp", tf.zeros([1, 8, 8, 1]), 10)
        assigns = []
        for variable in tf.compat.v1.global_variables():
            value = np.zeros(variable.shape.as_list(), np.float32)
            if variable.op.name == "mlp/hidden_0/kernel":
                value[np.arange(10), np.arange(10)] = 1.0  # Hidden unit i = pixel i.
            if variable.op.name == "mlp/logits/kernel":
                value[np.arange(10), np.arange(10)] = kernel_scale
            assigns.append(variable.assign(value))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(assigns)
            return saver.save(session, str(path))


def test_evaluate_checkpoint_restores_a_plain_model(tmp_path):
    checkpoint = _save_plain_mlp(tmp_path / "plain", kernel_scale=1.0)
    # Four images; pixel i (row-major) lights up for the first two (labels 3 and 7).
    images = np.zeros((4, 8, 8, 1), np.float32)
    images[0, 0, 3] = images[1, 0, 7] = images[2, 0, 1] = images[3, 0, 2] = 1.0
    labels = np.array([3, 7, 1, 5])  # The last one is wrong: it predicts 2.
    result = models.evaluate_checkpoint(checkpoint, "mlp", images, labels, 10, batch_size=3)
    assert result["accuracy"] == pytest.approx(0.75)
    # Loss of each image: logits are 1 at the lit pixel, 0 elsewhere, so the correct ones
    # cost -log(e / (e + 9)) and the wrong one -log(1 / (e + 9)).
    e = np.e
    expected = (3 * -np.log(e / (e + 9)) - np.log(1 / (e + 9))) / 4
    assert result["loss"] == pytest.approx(expected, rel=1e-5)


def test_evaluate_checkpoint_errors(tmp_path):
    checkpoint = _save_plain_mlp(tmp_path / "plain", kernel_scale=1.0)
    with pytest.raises(ValueError, match="non-empty and of equal length, got 2 images and 1"):
        models.evaluate_checkpoint(checkpoint, "mlp", np.zeros((2, 8, 8, 1)), np.zeros(1), 10)
    with pytest.raises(tf.errors.NotFoundError):  # A CNN's variables are not in it.
        models.evaluate_checkpoint(checkpoint, "cnn", np.zeros((1, 8, 8, 1)), np.zeros(1), 10)
