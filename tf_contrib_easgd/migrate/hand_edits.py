"""The hand edits easgd-migrate names for tf.contrib uses it cannot convert.

A helper of `tf_contrib_easgd.migrate.contrib_names`: for the contrib APIs TF1 scripts used
most, what to write instead on TensorFlow 2, as `Advice` of a kind: what the names it is
attached to are (a data loader, model functions, a layer, ...). tests/tools/test_migrate_tf1.py
checks each piece against the names it is attached to, and that every `tf.*` name in these
texts exists in the installed TensorFlow.
"""

import dataclasses

# The kinds of advice: what the names are, whose replacement the advice describes.
DATA = "data loading"
MODEL = "model functions"
LAYER = "layer"
INITIALIZER = "initializer"
REGULARIZER = "regularizer"
GLOBAL_STEP = "global step"
LIBRARY = "a library of its own"
LOSS = "loss"
METRIC = "metric"
TRAINING = "training loop"
PREPROCESSING = "text preprocessing"


@dataclasses.dataclass(frozen=True)
class Advice:
    """What to write instead of a name TensorFlow 2 lacks.

    Attributes:
        kind: what the name is (`DATA`, `MODEL`, `LAYER`, ...).
        text: the hand edit.
    """

    kind: str
    text: str


def advice(name):
    """Returns the `Advice` for the qualified `name` (the longest entry it lies under), or None."""
    parts = name.split(".")
    for end in range(len(parts), 2, -1):
        found = HAND_EDITS.get(".".join(parts[:end]))
        if found:
            return found
    return None


def hand_edit(name):
    """Returns what to write instead of the qualified `name`, or None when nothing is known."""
    found = advice(name)
    return found.text if found else None


_MNIST = Advice(
    DATA,
    "tf.keras.datasets.mnist.load_data() returns ((x_train, y_train), (x_test, y_test)) as uint8 "
    "28x28 images and integer labels: reshape to [-1, 784] and divide by 255.0 as "
    "read_data_sets did, one-hot with np.eye(10)[labels] if it had one_hot=True, keep the last "
    "5000 training images apart for .validation, and replace .next_batch(n) with your own "
    "batches (a shuffled index per epoch, or tf.data.Dataset.from_tensor_slices((x, y))"
    ".shuffle(60000).batch(n).repeat()).",
)
_MNIST_MODEL = Advice(
    MODEL,
    "the tutorial's model functions (inference, loss, training, evaluation) are not in "
    "TensorFlow 2's pip package: copy the ones you use into your project from TensorFlow "
    "1.x's tensorflow/examples/tutorials/mnist/mnist.py (Apache 2.0). Its weights are "
    "tf.Variable, which the EASGD getter never sees: make each with "
    "tf.compat.v1.get_variable(NAME, initializer=INITIAL_VALUE) inside the getter's "
    "variable_scope.",
)
_LEARN_DATASETS = Advice(
    DATA,
    "contrib.learn's dataset loaders are gone: read a CSV file with numpy.loadtxt or "
    "pandas.read_csv (load_csv_with_header's first line held the numbers of samples and "
    "features), take iris from scikit-learn (sklearn.datasets.load_iris()) and MNIST from "
    "tf.keras.datasets.mnist.load_data(), and batch the arrays with "
    "tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N).batch(n).repeat().",
)
_GLOROT = Advice(
    INITIALIZER,
    "use tf.compat.v1.glorot_uniform_initializer() (uniform=False: "
    "tf.compat.v1.glorot_normal_initializer()); seed and dtype carry over.",
)
_SLIM = Advice(
    LIBRARY,
    "pip install tf-slim and `import tf_slim as slim`: that package keeps slim's API "
    "(easgd-migrate rewrites slim's public names; a path into contrib's internals such as "
    "tf.contrib.slim.python.slim.X is tf_slim.X there).",
)
_LAYERS = "tensorflow.contrib.layers."

# What to write instead of the tf.contrib (and tensorflow.examples) names TF1 scripts used
# most, by qualified name or module; the longest match wins, so a module whose parts are of
# different kinds (contrib.learn's training, its datasets and its preprocessing; the MNIST
# tutorial's data loader and its model) has an entry per part. Every tf.* name here exists
# in TensorFlow 2.15 to 2.21 (tests/tools/test_migrate_tf1.py checks).
HAND_EDITS = {
    _LAYERS + "xavier_initializer": _GLOROT,
    _LAYERS + "xavier_initializer_conv2d": _GLOROT,
    _LAYERS + "variance_scaling_initializer": Advice(
        INITIALIZER,
        "use tf.compat.v1.variance_scaling_initializer(scale=FACTOR, mode='fan_in', "
        "distribution='truncated_normal'); contrib's default factor was 2.0, and "
        "uniform=True is distribution='uniform' there.",
    ),
    _LAYERS + "fully_connected": Advice(
        LAYER,
        "use tf.compat.v1.layers.dense(inputs, NUM_OUTPUTS, activation=tf.nn.relu): "
        "fully_connected applied ReLU by default, dense applies none; weights_initializer "
        "and biases_initializer are kernel_initializer and bias_initializer there.",
    ),
    _LAYERS + "conv2d": Advice(
        LAYER,
        "use tf.compat.v1.layers.conv2d(inputs, NUM_OUTPUTS, KERNEL, padding='same', "
        "activation=tf.nn.relu): contrib padded 'SAME' and applied ReLU by default.",
    ),
    _LAYERS + "max_pool2d": Advice(
        LAYER,
        "use tf.compat.v1.layers.max_pooling2d(inputs, KERNEL, strides=2): contrib's "
        "default stride was 2.",
    ),
    _LAYERS + "flatten": Advice(LAYER, "use tf.compat.v1.layers.flatten(inputs)."),
    _LAYERS + "dropout": Advice(
        LAYER,
        "use tf.compat.v1.layers.dropout(inputs, rate=1 - KEEP_PROB, training=IS_TRAINING): "
        "contrib took the probability to keep (0.5) and trained by default.",
    ),
    _LAYERS + "batch_norm": Advice(
        LAYER,
        "use tf.compat.v1.layers.batch_normalization(inputs, momentum=DECAY, scale=SCALE, "
        "training=IS_TRAINING) and run the tf.compat.v1.GraphKeys.UPDATE_OPS ops with the "
        "train op as before; contrib's defaults were decay=0.999 and scale=False.",
    ),
    _LAYERS + "l2_regularizer": Advice(
        REGULARIZER,
        "use `lambda w: SCALE * tf.nn.l2_loss(w)`, the same penalty (or "
        "tf.keras.regularizers.l2(0.5 * SCALE): Keras does not halve the sum of squares).",
    ),
    _LAYERS + "l1_regularizer": Advice(
        REGULARIZER,
        "use `lambda w: SCALE * tf.reduce_sum(tf.abs(w))`, the same penalty (or "
        "tf.keras.regularizers.l1(SCALE)).",
    ),
    _LAYERS + "apply_regularization": Advice(
        REGULARIZER, "use tf.add_n([REGULARIZER(w) for w in WEIGHTS])."
    ),
    "tensorflow.contrib.framework.get_or_create_global_step": Advice(
        GLOBAL_STEP, "use tf.compat.v1.train.get_or_create_global_step()."
    ),
    "tensorflow.contrib.framework.get_global_step": Advice(
        GLOBAL_STEP, "use tf.compat.v1.train.get_global_step()."
    ),
    "tensorflow.contrib.slim": _SLIM,
    "tensorflow.contrib.framework.arg_scope": _SLIM,
    "tensorflow.contrib.rnn": Advice(
        LAYER,
        "the cells are in tf.compat.v1.nn.rnn_cell (BasicLSTMCell, LSTMCell, GRUCell, "
        "MultiRNNCell, DropoutWrapper, ...), static_rnn is tf.compat.v1.nn.static_rnn; the "
        "cells need tf-keras on TensorFlow 2.16 and later, as tf.compat.v1.layers does.",
    ),
    "tensorflow.contrib.losses": Advice(
        LOSS, "use the loss function of the same name in tf.compat.v1.losses."
    ),
    "tensorflow.contrib.metrics": Advice(
        METRIC,
        "use tf.compat.v1.metrics (streaming_accuracy is tf.compat.v1.metrics.accuracy, "
        "streaming_mean is tf.compat.v1.metrics.mean, ...).",
    ),
    "tensorflow.contrib.learn": Advice(
        TRAINING,
        "train with tf.compat.v1.train.MonitoredTrainingSession (or an Estimator, on "
        "TensorFlow 2.15 and older).",
    ),
    "tensorflow.contrib.learn.preprocessing": Advice(
        PREPROCESSING,
        "VocabularyProcessor: use tf.keras.layers.TextVectorization(max_tokens=VOCABULARY, "
        "output_sequence_length=MAX_DOCUMENT_LENGTH) and its adapt(texts): it maps the words "
        "of each text to integer ids padded to that length, as fit_transform did.",
    ),
    "tensorflow.contrib.learn.datasets": _LEARN_DATASETS,
    "tensorflow.contrib.learn.python.learn.datasets": _LEARN_DATASETS,
    "tensorflow.contrib.learn.datasets.mnist": _MNIST,
    "tensorflow.contrib.learn.python.learn.datasets.mnist": _MNIST,
    "tensorflow.examples.tutorials.mnist": _MNIST,
    "tensorflow.examples.tutorials.mnist.input_data": _MNIST,
    "tensorflow.examples.tutorials.mnist.mnist": _MNIST_MODEL,
}
