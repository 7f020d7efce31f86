"""The classifiers of easgd-train, in TF1 and in Keras, and their evaluation.

The TF1 models make every variable with `tf.compat.v1.get_variable`, so that under an
`ElasticAverageCustomGetter` each one gets its worker copy and centres, and built without
the getter the same code makes a plain model with the same variable names: the names
`swapping_saver` writes the centre under. `--api=keras` builds the same models in Keras
(`build_keras_model`), under the same names.
"""

import math

import numpy as np
import tensorflow as tf

from tf_contrib_easgd.trainer.config import MODELS, OPTIMIZERS

#: Hidden layer sizes of the MLP.
MLP_HIDDEN_UNITS = (128,)

#: Output channels of the CNN's two 3x3 convolutions (each followed by 2x2 max pooling),
#: and the width of its dense layer.
CNN_CHANNELS = (16, 32)
CNN_DENSE_UNITS = 64

#: Examples per batch when a model is evaluated.
EVAL_BATCH = 1000
#: The momentum of the `momentum` and `nesterov` optimizers, TF1's and Keras's.
MOMENTUM = 0.9


def build_model(name, images, num_classes):
    """Builds model `name` on `images` and returns its logits.

    Args:
        name: `"mlp"` or `"cnn"`.
        images: float32 tensor `(batch, height, width, channels)`.
        num_classes: number of classes, at least 2.

    Returns:
        A float32 tensor of logits `(batch, num_classes)`.

    Raises:
        ValueError: if `name` is not one of `MODELS`, `num_classes < 2`, or `images` has no
            static `(height, width, channels)` shape.
    """
    if name not in MODELS:
        raise ValueError(f"name must be one of {list(MODELS)}, got {name!r}.")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes!r}.")
    if images.shape.rank != 4 or not images.shape[1:].is_fully_defined():
        raise ValueError(
            f"images must have the static shape (batch, height, width, channels), got "
            f"{images.shape}."
        )
    return mlp(images, num_classes) if name == "mlp" else cnn(images, num_classes)


def mlp(images, num_classes, hidden_units=MLP_HIDDEN_UNITS):
    """A multi-layer perceptron's logits on `images` (see `build_model`): flatten, ReLU
    hidden layers of `hidden_units`, linear output."""
    with tf.compat.v1.variable_scope("mlp"):
        features = math.prod(images.shape[1:])
        net = tf.reshape(images, [-1, features])
        for i, units in enumerate(hidden_units):
            net = tf.nn.relu(
                _dense(net, units, f"hidden_{i}", tf.compat.v1.initializers.he_normal())
            )
        return _dense(net, num_classes, "logits", tf.compat.v1.initializers.glorot_uniform())


def cnn(images, num_classes, channels=CNN_CHANNELS, dense_units=CNN_DENSE_UNITS):
    """A small convolutional network's logits on `images` (see `build_model`): a 3x3
    convolution, ReLU and 2x2 max pooling per entry of `channels` (its output channels),
    then a ReLU dense layer of `dense_units` and a linear output."""
    with tf.compat.v1.variable_scope("cnn"):
        net = images
        for i, out_channels in enumerate(channels):
            in_channels = net.shape[-1]
            kernel = tf.compat.v1.get_variable(
                f"conv_{i}/kernel",
                [3, 3, in_channels, out_channels],
                initializer=tf.compat.v1.initializers.he_normal(),
            )
            bias = tf.compat.v1.get_variable(
                f"conv_{i}/bias", [out_channels], initializer=tf.compat.v1.zeros_initializer()
            )
            net = tf.nn.relu(tf.nn.conv2d(net, kernel, strides=1, padding="SAME") + bias)
            net = tf.nn.max_pool2d(net, ksize=2, strides=2, padding="SAME")
        net = tf.reshape(net, [-1, math.prod(net.shape[1:])])
        net = tf.nn.relu(_dense(net, dense_units, "dense", tf.compat.v1.initializers.he_normal()))
        return _dense(net, num_classes, "logits", tf.compat.v1.initializers.glorot_uniform())


def _dense(inputs, units, name, initializer):
    """A fully connected layer `inputs @ kernel + bias` made with `get_variable`."""
    kernel = tf.compat.v1.get_variable(
        f"{name}/kernel", [inputs.shape[-1], units], initializer=initializer
    )
    bias = tf.compat.v1.get_variable(
        f"{name}/bias", [units], initializer=tf.compat.v1.zeros_initializer()
    )
    return tf.matmul(inputs, kernel) + bias


def metric_sums(logits, labels):
    """Returns `(correct, loss)`: float64 sums over the batch of right answers and of loss
    of `logits` `(batch, num_classes)` and int64 `labels`, so that `evaluate` can add
    batches of any size."""
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float64))
    loss = tf.reduce_sum(
        tf.cast(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
            tf.float64,
        )
    )
    return correct, loss


def evaluate(run, sums, images_in, labels_in, images, labels, batch_size=EVAL_BATCH):
    """Evaluates a model on `images` and `labels`, batch by batch.

    Args:
        run: runs fetches with a feed dict, e.g. a session's `run`.
        sums: the `(correct, loss)` tensors of `metric_sums`.
        images_in: the placeholder the images are fed into.
        labels_in: the placeholder the labels are fed into.
        images: float32 array `(n, height, width, channels)`, `n > 0`.
        labels: int array `(n,)`.
        batch_size: examples per evaluation batch.

    Returns:
        A dict with `accuracy` and mean cross-entropy `loss` over the `n` examples.
    """
    totals = np.zeros(2)
    for start in range(0, len(images), batch_size):
        feed = {
            images_in: images[start : start + batch_size],
            labels_in: labels[start : start + batch_size],
        }
        totals += run(list(sums), feed)
    return {"accuracy": totals[0] / len(images), "loss": totals[1] / len(images)}


def evaluate_checkpoint(checkpoint_path, model, images, labels, num_classes, batch_size=EVAL_BATCH):
    """Restores a checkpoint into a plain model (no EASGD) and evaluates it as `evaluate` does.

    As a user of the trained centre would: a fresh graph without custom getter or device
    placement, a default `tf.compat.v1.train.Saver`.

    Args:
        checkpoint_path: path prefix of the checkpoint (as `Saver.save` returns it).
        model: `"mlp"` or `"cnn"`, of `num_classes` classes.
        images: float32 array `(n, height, width, channels)`; `labels`, int array `(n,)`.

    Returns:
        `evaluate`'s dict.

    Raises:
        ValueError: if `images` is empty or does not match `labels`.
        tf.errors.NotFoundError: if the checkpoint lacks a variable of the model.
    """
    if len(images) == 0 or len(images) != len(labels):
        raise ValueError(
            f"images and labels must be non-empty and of equal length, got {len(images)} "
            f"images and {len(labels)} labels."
        )
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, *images.shape[1:]], name="images")
        y = tf.compat.v1.placeholder(tf.int64, [None], name="labels")
        sums = metric_sums(build_model(model, x, num_classes), y)
        saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session(graph=graph) as session:
        saver.restore(session, checkpoint_path)
        return evaluate(session.run, sums, x, y, images, labels, batch_size)


# The same models in Keras, for `--api=keras`.


def build_keras_model(name, image_shape, num_classes, seed):
    """Returns the Keras model `name` (`--api=keras`), built but not compiled.

    The same layers and initializers as `mlp` and `cnn`, its weights named as theirs
    (`mlp/hidden_0/kernel`), so that the centre's checkpoints of both APIs hold the same
    names.

    Args:
        name: `"mlp"` or `"cnn"`.
        image_shape: `(height, width, channels)`.
        num_classes: number of classes, at least 2.
        seed: seed of the initializers.

    Raises:
        ValueError: if `name` is not one of `MODELS`.
    """
    keras = tf.keras
    seeds = iter(range(seed * 100, seed * 100 + 100))

    def dense(units, layer_name, activation, initializer):
        return keras.layers.Dense(
            units,
            activation=activation,
            name=layer_name,
            kernel_initializer=initializer(seed=next(seeds)),
            bias_initializer="zeros",
        )

    layers = [keras.Input(image_shape)]
    if name == "mlp":
        layers.append(keras.layers.Flatten())
        for i, units in enumerate(MLP_HIDDEN_UNITS):
            layers.append(dense(units, f"hidden_{i}", "relu", keras.initializers.HeNormal))
    elif name == "cnn":
        for i, channels in enumerate(CNN_CHANNELS):
            layers.append(
                keras.layers.Conv2D(
                    channels,
                    3,
                    padding="same",
                    activation="relu",
                    name=f"conv_{i}",
                    kernel_initializer=keras.initializers.HeNormal(seed=next(seeds)),
                )
            )
            layers.append(keras.layers.MaxPooling2D(2, padding="same"))
        layers.append(keras.layers.Flatten())
        layers.append(dense(CNN_DENSE_UNITS, "dense", "relu", keras.initializers.HeNormal))
    else:
        raise ValueError(f"name must be one of {list(MODELS)}, got {name!r}.")
    layers.append(dense(num_classes, "logits", None, keras.initializers.GlorotUniform))
    return keras.Sequential(layers, name=name)


def make_keras_optimizer(name, learning_rate):
    """Returns the Keras optimizer of `--optimizer` `name` (momentum 0.9 where it has one).

    Raises:
        ValueError: if `name` is not one of `OPTIMIZERS`.
    """
    optimizers = tf.keras.optimizers
    if name == "sgd":
        return optimizers.SGD(learning_rate)
    if name in ("momentum", "nesterov"):
        return optimizers.SGD(learning_rate, momentum=MOMENTUM, nesterov=name == "nesterov")
    if name == "adam":
        return optimizers.Adam(learning_rate)
    if name == "adagrad":
        return optimizers.Adagrad(learning_rate)
    if name == "rmsprop":
        return optimizers.RMSprop(learning_rate)
    raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {name!r}.")


def compile_keras_model(model, optimizer, learning_rate):
    """Compiles `model` for training on integer labels with its logits."""
    model.compile(
        optimizer=make_keras_optimizer(optimizer, learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def evaluate_keras(model, images, labels):
    """Returns `{"accuracy", "loss"}` of the Keras model `model` on `images` and `labels`."""
    logits = model.predict(images, batch_size=EVAL_BATCH, verbose=0)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {
        "accuracy": float((logits.argmax(axis=1) == labels).mean()),
        "loss": float(tf.reduce_mean(loss)),
    }
