"""Elastic Averaging SGD for TensorFlow 2.x graph mode, compatible with tf.contrib.opt.

A drop-in replacement for `tf.contrib.opt.ElasticAverageOptimizer` and
`tf.contrib.opt.ElasticAverageCustomGetter`, built on `tf.compat.v1`.
"""

from tf_contrib_easgd.completion import (
    FinishedWorkers,
    TrainingCompletion,
    serve_until_done,
    stop_parameter_servers,
)
from tf_contrib_easgd.custom_getter import (
    GLOBAL_STEP,
    GLOBAL_VARIABLE_NAME,
    LOCAL_VARIABLE_NAME,
    ElasticAverageCustomGetter,
)
from tf_contrib_easgd.hook import ElasticAverageOptimizerHook
from tf_contrib_easgd.optimizer import ElasticAverageOptimizer
from tf_contrib_easgd.penalty import ElasticPenaltyWarning
from tf_contrib_easgd.recovery import (
    is_recoverable_error,
    train_with_recovery,
    wait_until_reachable,
)
from tf_contrib_easgd.sessions import (
    CentreKeepingScaffold,
    CentreWaitingSessionCreator,
    MonitoredTrainingSession,
    centre_readiness_tensor,
    wait_for_centre,
)

__version__ = "0.1.0"

__all__ = [
    "GLOBAL_STEP",
    "GLOBAL_VARIABLE_NAME",
    "LOCAL_VARIABLE_NAME",
    "CentreKeepingScaffold",
    "CentreWaitingSessionCreator",
    "ElasticAverageCustomGetter",
    "ElasticAverageOptimizer",
    "ElasticAverageOptimizerHook",
    "ElasticPenaltyWarning",
    "FinishedWorkers",
    "MonitoredTrainingSession",
    "TrainingCompletion",
    "__version__",
    "centre_readiness_tensor",
    "is_recoverable_error",
    "serve_until_done",
    "stop_parameter_servers",
    "train_with_recovery",
    "wait_for_centre",
    "wait_until_reachable",
]
