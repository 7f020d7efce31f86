"""Whether the installed TensorFlow has tf.estimator, and the mark of tests that need it;
the warning filters and numbers the estimator tests share.

tf.estimator exists up to TensorFlow 2.15 (with tensorflow-estimator); 2.16 removed it.
`make test-tf215` runs the marked tests; `make test` (TensorFlow 2.21) skips them. The
tests are tests/unit/test_estimator.py and tests/e2e/test_estimator_e2e.py.
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


# The `pytestmark` of the estimator tests: warnings of their models, filtered.
WARNING_FILTERS = [
    pytest.mark.filterwarnings("ignore:`tf.layers.dense` is deprecated:UserWarning"),
    # The getter makes the worker copy and both centres with the same initializer, on
    # purpose: all three start equal.
    pytest.mark.filterwarnings("ignore:The initializer .* is unseeded:UserWarning"),
]


# The communication period of the estimator tests' workers (and of
# examples/estimator_digits.py's).
TAU = 4


# The test accuracy a trained centre reaches on the digits: plain SGD at learning rate 0.2,
# batch 32, one worker and tau 4 reached 0.93 after 400 local steps; chance is 0.10.
TARGET_ACCURACY = 0.85
