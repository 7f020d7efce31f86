"""The Keras flavours the Keras layers tests run on: tf-keras (Keras 2) and Keras 3.

`KERAS_3` says which Keras `keras` is; `KERAS_FLAVOURS` are the parameters of the
`layers` fixture. The fixtures are bound in the test modules that use them
(tests/unit/test_keras_layers.py, tests/cluster/test_keras_layers_cluster.py) by
assignment: `layers = keras_flavours.layers`.
"""

import importlib
import importlib.util

import pytest

#: Whether `keras` is Keras 3 (TensorFlow 2.16 and later). On TensorFlow 2.15 it is Keras 2,
#: what TF1 scripts had, and tf-keras is its copy: importing both in one process breaks
#: Keras 2's models, so there `keras` alone stands for Keras 2.
KERAS_3 = int(importlib.import_module("keras").__version__.split(".")[0]) >= 3


KERAS_FLAVOURS = [
    pytest.param(
        "tf_keras",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("tf_keras") is None or not KERAS_3,
            reason="needs tf-keras beside Keras 3",
        ),
    ),
    "keras",
]


@pytest.fixture(autouse=True)
def keras_2_stays_out_of_tf1_mode(request):
    """On TensorFlow 2.15 (Keras 2), skips the TF1-mode cases: Keras 2 used under
    disable_v2_behavior() breaks the Keras models this process builds after it (measured:
    a later Sequential fails with "Output tensors of a Sequential model must be the output
    of a TensorFlow `Layer`"). TF1 mode is covered there in fresh interpreters, by
    tests/subprocess/test_keras_layers_job.py. Autouse in the modules that bind it."""
    params = getattr(request.node, "callspec", None)
    if not KERAS_3 and params is not None and params.params.get("world") == "tf1":
        pytest.skip("Keras 2 in TF1 mode: in fresh interpreters only (TensorFlow 2.15)")


@pytest.fixture(params=KERAS_FLAVOURS)
def layers(request):
    """The `layers` module of tf-keras (Keras 2) or of Keras 3."""
    return importlib.import_module(request.param).layers
