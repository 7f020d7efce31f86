"""Elastic Averaging SGD for TensorFlow 2.x graph mode, compatible with tf.contrib.opt.

A drop-in replacement for `tf.contrib.opt.ElasticAverageOptimizer` and
`tf.contrib.opt.ElasticAverageCustomGetter`, built on `tf.compat.v1`, with the pieces a
between-graph job needs to find its cluster (flags, TF_CONFIG, a Slurm job step), start,
end and recover; `ElasticAverageWorker`, the same averaging for a TF 2 custom training loop,
and `ElasticAverageCallback` (also `tf_contrib_easgd.keras`), for Keras `model.fit`. The
names below load their module, and TensorFlow with it, when first used: `import
tf_contrib_easgd` alone, and the command-line tools' `--help`, import no TensorFlow.
docs/DESIGN.md shows how the parts fit.
"""

import importlib

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_PUBLIC = {
    "GLOBAL_STEP": "custom_getter",
    "GLOBAL_VARIABLE_NAME": "custom_getter",
    "LOCAL_VARIABLE_NAME": "custom_getter",
    "ElasticAverageCustomGetter": "custom_getter",
    "ElasticAverageCallback": "keras.callback",
    "ElasticAverageWorker": "eager.worker",
    "ElasticAverageOptimizer": "optimizer",
    "ElasticAverageOptimizerHook": "hook",
    "ElasticPenaltyWarning": "penalty",
    "CentreKeepingScaffold": "job.sessions",
    "CentreWaitingSessionCreator": "job.sessions",
    "MonitoredTrainingSession": "job.sessions",
    "centre_readiness_tensor": "job.sessions",
    "wait_for_centre": "job.sessions",
    "FinishedWorkers": "job.completion",
    "TrainingCompletion": "job.completion",
    "serve_until_done": "job.completion",
    "stop_parameter_servers": "job.completion",
    "WorkLedger": "job.ledger",
    "ClusterConfigError": "cluster.resolver",
    "ClusterTask": "cluster.resolver",
    "cluster_from_hosts": "cluster.resolver",
    "cluster_from_slurm": "cluster.slurm",
    "cluster_from_tf_config": "cluster.tf_config",
    "is_recoverable_error": "job.recovery",
    "train_with_recovery": "job.recovery",
    "wait_until_reachable": "job.recovery",
    "reuse_freed_memory": "job.freed_memory",
}

__all__ = [
    "__version__",
    "CentreKeepingScaffold",
    "CentreWaitingSessionCreator",
    "ClusterConfigError",
    "ClusterTask",
    "ElasticAverageCallback",
    "ElasticAverageCustomGetter",
    "ElasticAverageOptimizer",
    "ElasticAverageOptimizerHook",
    "ElasticAverageWorker",
    "ElasticPenaltyWarning",
    "FinishedWorkers",
    "GLOBAL_STEP",
    "GLOBAL_VARIABLE_NAME",
    "LOCAL_VARIABLE_NAME",
    "MonitoredTrainingSession",
    "TrainingCompletion",
    "WorkLedger",
    "centre_readiness_tensor",
    "cluster_from_hosts",
    "cluster_from_slurm",
    "cluster_from_tf_config",
    "is_recoverable_error",
    "reuse_freed_memory",
    "serve_until_done",
    "stop_parameter_servers",
    "train_with_recovery",
    "wait_for_centre",
    "wait_until_reachable",
]


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tf_contrib_easgd' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"tf_contrib_easgd.{module}"), name)
    globals()[name] = value  # Later lookups skip this function.
    return value


def __dir__():
    return sorted({*globals(), *_PUBLIC})
