"""easgd-train's models as Keras models (`--api=keras`), and their Keras optimizers.

The same MLP and CNN as `models`, layer for layer and initializer for initializer, built
with `tf.keras` (Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1); their weights are named
as `models` names its variables (`mlp/hidden_0/kernel`), so that the centre's checkpoints
of both APIs hold the same names.
"""

import tensorflow as tf

from tf_contrib_easgd.trainer import models
from tf_contrib_easgd.trainer.config import OPTIMIZERS

#: The momentum of the `momentum` and `nesterov` optimizers (as `graph.MOMENTUM`).
MOMENTUM = 0.9


def build_model(name, image_shape, num_classes, seed):
    """Returns the Keras model `name` ("mlp" or "cnn"), built but not compiled.

    Args:
        name: `"mlp"` or `"cnn"`.
        image_shape: `(height, width, channels)`.
        num_classes: number of classes, at least 2.
        seed: seed of the initializers.

    Raises:
        ValueError: if `name` is not one of `models.MODELS`.
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
        for i, units in enumerate(models.MLP_HIDDEN_UNITS):
            layers.append(dense(units, f"hidden_{i}", "relu", keras.initializers.HeNormal))
    elif name == "cnn":
        for i, channels in enumerate(models.CNN_CHANNELS):
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
        layers.append(dense(models.CNN_DENSE_UNITS, "dense", "relu", keras.initializers.HeNormal))
    else:
        raise ValueError(f"name must be one of {list(models.MODELS)}, got {name!r}.")
    layers.append(dense(num_classes, "logits", None, keras.initializers.GlorotUniform))
    return keras.Sequential(layers, name=name)


def make_optimizer(name, learning_rate):
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


def compile_model(model, optimizer, learning_rate):
    """Compiles `model` for training on integer labels with its logits."""
    model.compile(
        optimizer=make_optimizer(optimizer, learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def evaluate(model, images, labels):
    """Returns `{"accuracy", "loss"}` of `model` on `images` and `labels`."""
    logits = model.predict(images, batch_size=models.EVAL_BATCH, verbose=0)
    loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {
        "accuracy": float((logits.argmax(axis=1) == labels).mean()),
        "loss": float(tf.reduce_mean(loss)),
    }
