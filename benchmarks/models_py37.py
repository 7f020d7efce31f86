"""The benchmark MLP in Python 3.7 code, for the TensorFlow 1.15 side of the contrib comparison.

models.py and specs.py need a Python 3.10 or later, while TensorFlow 1.15, the last with
`tf.contrib`, runs on Python 3.7 at the newest. So the driver (run.py) sends the spec of
the model to TensorFlow 1.15's workers (contrib_task.py) as JSON (`ModelSpec.as_json()`:
its fields and its variables in creation order), and this module builds from it the network of
models.py: the same `get_variable` calls with the same initialisers (zeros for biases, He
normal seeded by the variable's position otherwise), the same forward pass (each parameter
read with `read_value()`, ReLU between layers) and the same loss. Only the MLP kind is
here: the comparison with contrib measures mlp-2.9M.

The batch is not drawn again: from the same seed, numpy 1.18 (TensorFlow 1.15's) and numpy 2
draw float32 values that differ in their last bits. The driver writes the arrays of
`specs.synthetic_batch` to a file, and `load_batch` reads them.

`fingerprint` runs in both worlds (task.py uses it too): run.py compares the digests of
every worker's variables (names, shapes, values before the first step) and batch, and the
loss on it, between the two TensorFlow versions, and stops if they differ.

Python 3.7 syntax only (benchmarks/ruff.toml gives ruff this file's target version).
"""

import hashlib

import numpy as np
import tensorflow as tf


def _check_mlp(spec):
    if spec["kind"] != "mlp":
        raise ValueError("models_py37 builds MLPs only, not {!r}".format(spec["kind"]))


def make_params(spec):
    """Creates the variables of `spec` (JSON) as models.make_params does; returns name -> var."""
    _check_mlp(spec)
    params = {}
    for name, shape in spec["shapes"]:
        if name.endswith("biases"):
            initializer = tf.compat.v1.zeros_initializer()
        else:
            initializer = tf.compat.v1.initializers.he_normal(seed=len(params))
        params[name] = tf.compat.v1.get_variable(name, shape, initializer=initializer)
    return params


def logits(spec, params, images):
    """The forward pass of models.logits for an MLP `spec` (JSON)."""
    _check_mlp(spec)
    width = int(np.prod(spec["input_shape"]))
    net = tf.reshape(images, [-1, width])
    hidden = len(spec["layers"])
    for i in range(hidden + 1):
        weights = params[f"layer_{i}/weights"].read_value()
        net = tf.matmul(net, weights) + params[f"layer_{i}/biases"].read_value()
        if i < hidden:
            net = tf.nn.relu(net)
    return net


def loss(spec, params, images, labels):
    """Mean softmax cross-entropy, as models.loss."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits(spec, params, images)
        )
    )


def load_batch(path):
    """The (images, labels) arrays of an .npz file (`contrib_section._save_batch` writes them)."""
    with np.load(str(path), allow_pickle=False) as arrays:
        return arrays["images"], arrays["labels"]


def _digest(items):
    digest = hashlib.sha256()
    for name, item in items:
        value = np.ascontiguousarray(item)
        header = "{}:{}:{};".format(name, value.dtype.str, ",".join(map(str, value.shape)))
        digest.update(header.encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def fingerprint(session, variables, loss_tensor, images, labels):
    """Digests of `variables` (names, shapes, values) and of the batch, and the loss.

    Args:
        session: a session of the variables' graph, after initialisation.
        variables: the worker's trainable variables, in creation order.
        loss_tensor: the model's loss on the batch.
        images: the batch's images (numpy).
        labels: the batch's labels (numpy).

    Returns:
        A dict: "params" and "batch" (sha256 hex digests), "variables" (how many), "loss".
    """
    values = session.run(list(variables))
    params = _digest((v.op.name, value) for v, value in zip(variables, values))
    return {
        "params": params,
        "batch": _digest((("images", images), ("labels", labels))),
        "variables": len(values),
        "loss": float(session.run(loss_tensor)),
    }
