"""Whether the installed TensorFlow has tf.estimator, and the mark of tests that need it.

tf.estimator exists up to TensorFlow 2.15 (with tensorflow-estimator); 2.16 removed it.
`make test-tf215` runs the marked tests; `make test` (TensorFlow 2.21) skips them.
"""

import pytest
import tensorflow as tf


def _has_estimator():
    try:
        tf.estimator.EstimatorSpec  # noqa: B018  tf.estimator is imported lazily.
    except (AttributeError, ImportError):
        return False
    return True


HAS_ESTIMATOR = _has_estimator()
requires_estimator = pytest.mark.skipif(
    not HAS_ESTIMATOR,
    reason=(
        f"TensorFlow {tf.__version__} has no tf.estimator (2.16 removed it); these tests run "
        "on TensorFlow 2.15 with tensorflow-estimator: `make test-tf215`."
    ),
)
