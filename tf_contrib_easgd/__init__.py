"""Elastic Averaging SGD for TensorFlow 2.x graph mode, compatible with tf.contrib.opt.

A drop-in replacement for `tf.contrib.opt.ElasticAverageOptimizer` and
`tf.contrib.opt.ElasticAverageCustomGetter`, built on `tf.compat.v1`.
"""

from tf_contrib_easgd.custom_getter import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
)
from tf_contrib_easgd.exchange import is_recoverable_error
from tf_contrib_easgd.hook import ElasticAverageOptimizerHook
from tf_contrib_easgd.optimizer import ElasticAverageOptimizer
from tf_contrib_easgd.penalty import ElasticPenaltyWarning

__version__ = "0.1.0"

__all__ = [
    "GLOBAL_STEP",
    "GLOBAL_VARIABLE_NAME",
    "LOCAL_VARIABLE_NAME",
    "ElasticAverageCustomGetter",
    "ElasticAverageOptimizer",
    "ElasticAverageOptimizerHook",
    "ElasticPenaltyWarning",
    "__version__",
    "is_recoverable_error",
]
