"""EASGD inside a `tf.estimator` model_fn (TensorFlow <= 2.15 with `tensorflow-estimator`).

`ElasticAverageEstimatorHelper` turns a model_fn into an EASGD one; `global_step` counts
exchanges, so `exchanges_for`, `count_workers` and `StopAtLocalStepHook` set the Estimator's
limits in local steps; `session_config` gives the workers direct exchanges. docs/ESTIMATOR.md
shows how. TensorFlow 2.16 and later have no `tf.estimator`: importing this module there
raises an ImportError that says what to install.
"""

from tf_contrib_easgd.cluster.tf_config import count_workers, session_config
from tf_contrib_easgd.estimator.helper import ElasticAverageEstimatorHelper
from tf_contrib_easgd.estimator.local_steps import StopAtLocalStepHook, exchanges_for

__all__ = [
    "ElasticAverageEstimatorHelper",
    "StopAtLocalStepHook",
    "count_workers",
    "exchanges_for",
    "session_config",
]
