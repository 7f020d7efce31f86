"""TF_CONFIG of a `tf.estimator` job: its number of workers, and a worker's session config.

Re-exported by `tf_contrib_easgd.estimator`: every task of a `train_and_evaluate` job reads
the same TF_CONFIG, the evaluator included, whose `RunConfig` has no cluster.
"""

import json
import os

import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

#: TF_CONFIG / RunConfig task types that train; the first one present is worker 0.
CHIEF_TYPES = ("chief", "master")
WORKER_TYPE = "worker"


def session_config(tf_config=None):
    """Returns the `session_config` for `tf.estimator.RunConfig` that makes exchanges cheap.

    The Estimator gives a worker's session its default config (`device_filters` for the
    ps tasks and itself, soft placement, one Grappler iteration) only when `RunConfig` has
    no `session_config`. This returns that default plus
    `share_cluster_devices_in_session=True`, with which the optimizer's hook lets the
    exchanges call the parameter servers directly instead of by `RemoteCall`
    (docs/API.md, "How an exchange reaches the parameter servers"). Tasks that do not train
    (ps, evaluator) and local training get None: the Estimator's default.

    Args:
        tf_config: the TF_CONFIG JSON text; None reads the environment variable.

    Returns:
        A `tf.compat.v1.ConfigProto`, or None.

    Raises:
        TypeError: if `tf_config` is neither a string nor None.
        ValueError: if `tf_config` is not a JSON object, or its training task is not in
            its cluster (naming TF_CONFIG's key and value).
    """
    config = _parse_tf_config(tf_config)
    task = config.get("task") or {}
    if not config.get("cluster") or task.get("type") not in (*CHIEF_TYPES, WORKER_TYPE):
        return None
    task_type = task["type"]
    _check_task_in_cluster(task_type, task.get("index", 0), config["cluster"])
    if task_type in CHIEF_TYPES:  # The filters of RunConfig's default, task by task.
        own = f"/job:{task_type}"
    else:
        own = f"/job:{WORKER_TYPE}/task:{task.get('index', 0)}"
    rewrite = rewriter_config_pb2.RewriterConfig(
        meta_optimizer_iterations=rewriter_config_pb2.RewriterConfig.ONE
    )
    return tf.compat.v1.ConfigProto(
        allow_soft_placement=True,
        graph_options=tf.compat.v1.GraphOptions(rewrite_options=rewrite),
        device_filters=["/job:ps", own],
        share_cluster_devices_in_session=True,
    )


def _check_task_in_cluster(task_type, index, cluster):
    """Raises ValueError unless TF_CONFIG's cluster has task `index` of type `task_type`."""
    hosts = cluster.get(task_type) if isinstance(cluster, dict) else None
    size = len(hosts) if isinstance(hosts, list) else 0
    if not size:
        raise ValueError(
            f"TF_CONFIG task.type={task_type!r}: the cluster has no {task_type!r} task "
            f"(cluster.{task_type} is missing or empty), so this task is not part of it."
        )
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise ValueError(
            f"TF_CONFIG task.index={index!r}: cluster.{task_type} has {size} task(s), so the "
            f"index must be an integer in [0, {size})."
        )


def _parse_tf_config(tf_config):
    """TF_CONFIG (the argument, else the environment variable) as a dict; {} when empty."""
    if tf_config is not None and not isinstance(tf_config, str):
        raise TypeError(
            f"tf_config must be TF_CONFIG's JSON text or None, got {tf_config!r} of type "
            f"{type(tf_config).__name__}."
        )
    text = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    try:
        config = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON: {text!r} ({error}).") from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object, got {text!r}.")
    return config


def count_workers(tf_config=None):
    """Returns the number of EASGD workers: the chief (or master) and worker tasks of TF_CONFIG.

    Every task of a `train_and_evaluate` job needs the same `TrainSpec.max_steps`, but the
    evaluator's RunConfig has no cluster (its `num_worker_replicas` is 0); this reads the
    cluster from TF_CONFIG instead, so it gives the same number on every task.

    Args:
        tf_config: the TF_CONFIG JSON text; None reads the environment variable. Without
            TF_CONFIG (or without a cluster in it) training is local: one worker.

    Returns:
        An int >= 1.

    Raises:
        TypeError: if `tf_config` is neither a string nor None.
        ValueError: if `tf_config` is not a JSON object.
    """
    cluster = _parse_tf_config(tf_config).get("cluster") or {}
    return max(1, sum(len(cluster.get(job) or ()) for job in (*CHIEF_TYPES, WORKER_TYPE)))
