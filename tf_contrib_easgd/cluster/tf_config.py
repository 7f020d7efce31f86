"""TF_CONFIG, read once for every user: easgd-train, the Estimator helper, your own script.

`read_tf_config` checks the variable as Kubernetes' training operator and `tf.estimator`
write it; `cluster_from_tf_config` makes it the `ClusterTask` of an EASGD cluster (the chief
is worker 0); `count_workers` and `session_config` serve `tf.estimator` jobs, whose
evaluator's RunConfig has no cluster. Bad input raises `ClusterConfigError` naming the key.
TensorFlow is imported by `session_config` only.
"""

# Why not `tf.distribute.cluster_resolver.TFConfigClusterResolver`: it reads the same variable,
# but not as EASGD needs it. It keeps `chief` and `evaluator` as jobs of their own, where an
# EASGD cluster has two jobs and the chief is worker 0; it checks nothing (bad JSON ends in a
# bare JSONDecodeError, a missing task is None, an address that is no host:port passes); and
# it needs TensorFlow, whose import (8-15 s) easgd-train's launcher and flag checks do without.
# So TF_CONFIG is read here, by TensorFlow's conventions (its keys and task types; `index` 0
# when missing, as RunConfig reads it), and tests/unit/test_cluster_resolver.py checks that this
# reading and the resolver's agree on every TF_CONFIG shape the operator writes.

import dataclasses
import json
import os

from tf_contrib_easgd.cluster.resolver import (
    PS,
    WORKER,
    ClusterConfigError,
    ClusterTask,
    check_address,
    check_unique,
)

#: The environment variable of the TFJob / Estimator cluster convention.
TF_CONFIG = "TF_CONFIG"
#: TF_CONFIG task types that are worker 0 (`master` is the operator's older name of `chief`).
CHIEF_TYPES = ("chief", "master")
#: TF_CONFIG task types that train.
TRAINER_TYPES = (*CHIEF_TYPES, WORKER)
#: The task type that only evaluates: in a cluster it is ignored, EASGD runs no such task.
EVALUATOR = "evaluator"
#: Every task type a TF_CONFIG cluster may have.
TF_CONFIG_TYPES = (*TRAINER_TYPES, PS, EVALUATOR)


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """A TF_CONFIG, checked: its cluster's addresses by task type, and its task.

    Attributes:
        cluster: `{task type: tuple of host:port}` of the types present, in TF_CONFIG_TYPES.
        task_type: the task's type, or None without a task.
        task_index: the task's index (0 when TF_CONFIG gives none, as RunConfig reads it).
        text: the JSON text, for messages.
    """

    cluster: dict
    task_type: str | None
    task_index: int
    text: str

    @property
    def num_trainers(self):
        """The number of EASGD workers: the chief (or master) and worker tasks."""
        return sum(len(self.cluster.get(job, ())) for job in TRAINER_TYPES)

    def easgd_task(self):
        """Returns the `ClusterTask` of this TF_CONFIG's task in its EASGD cluster.

        The `chief` (or `master`) is worker 0 and TF_CONFIG's worker i is worker i + 1
        (without a chief, worker i is worker i); an `evaluator` in the cluster is ignored.

        Raises:
            ClusterConfigError: if there is no cluster or no task, no `ps` or no training
                task, or the task is an evaluator.
        """
        if not self.cluster:
            raise ClusterConfigError(
                f"{TF_CONFIG}={self.text!r}: expected an object with a 'cluster' object and a "
                '\'task\' object, e.g. {"cluster": {"ps": [...], "worker": [...]}, "task": '
                '{"type": "worker", "index": 0}}.'
            )
        if self.task_type is None:
            raise ClusterConfigError(
                f'{TF_CONFIG} task=None: expected an object like {{"type": "worker", "index": 0}}.'
            )
        if self.task_type == EVALUATOR:
            raise ClusterConfigError(
                f"{TF_CONFIG} task.type={self.task_type!r}: an EASGD job runs the types "
                f"{sorted((*TRAINER_TYPES, PS))}; it has no evaluator (the chief evaluates the "
                "centre), so give this task no TF_CONFIG evaluator entry (a TFJob: no "
                "Evaluator replicas)."
            )
        if not self.cluster.get(PS):
            raise ClusterConfigError(
                f"{TF_CONFIG} cluster has no 'ps' task; EASGD needs at least 1."
            )
        if not self.num_trainers:
            raise ClusterConfigError(
                f"{TF_CONFIG} cluster has no 'chief', 'master' or 'worker' task."
            )
        workers = tuple(h for job in TRAINER_TYPES for h in self.cluster.get(job, ()))
        if self.task_type == PS:
            job, index = PS, self.task_index
        else:
            job = WORKER
            present = [job for job, hosts in self.cluster.items() if hosts]
            index = easgd_worker_index(self.task_type, self.task_index, present)
        origin = f"{TF_CONFIG} cluster.{self.task_type}[{self.task_index}]"
        return ClusterTask(self.cluster[PS], workers, job, index, TF_CONFIG, origin)


def easgd_worker_index(task_type, task_index, cluster_types):
    """Returns the EASGD worker index of a training task of a TF_CONFIG cluster.

    Args:
        task_type: `"chief"`, `"master"` or `"worker"`.
        task_index: its index among the tasks of its type.
        cluster_types: the task types of the cluster (a dict's keys will do).

    Returns:
        0 for the chief (or master); for worker i, i + 1 when the cluster has a chief (or
        master), else i.
    """
    if task_type in CHIEF_TYPES:
        return 0
    return task_index + (1 if any(job in cluster_types for job in CHIEF_TYPES) else 0)


def read_tf_config(tf_config=None, environ=None):
    """Reads and checks TF_CONFIG; returns a `TFConfig`, or None when it is unset or empty.

    Checks what every reader needs: JSON of an object; a `cluster` object (if any) of
    known task types, each a list of distinct host:port strings; at most one chief (or
    master); a `task` (if any) of a known type whose index is in its cluster (unless the
    cluster is empty, local training, or the task is an evaluator, which a cluster need not
    list). What EASGD needs beyond that (ps tasks, a training task) is `easgd_task`'s.

    Args:
        tf_config: the JSON text; None reads the variable from `environ`.
        environ: the environment (default `os.environ`).

    Raises:
        TypeError: if `tf_config` is neither a string nor None.
        ClusterConfigError: naming TF_CONFIG, the key and its value.
    """
    if tf_config is not None and not isinstance(tf_config, str):
        raise TypeError(
            f"tf_config must be TF_CONFIG's JSON text or None, got {tf_config!r} of type "
            f"{type(tf_config).__name__}."
        )
    if tf_config is None:
        tf_config = (os.environ if environ is None else environ).get(TF_CONFIG, "")
    text = tf_config
    if not text.strip():
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ClusterConfigError(f"{TF_CONFIG}={text!r} is not valid JSON: {error}.") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster", {}), dict):
        raise ClusterConfigError(
            f"{TF_CONFIG}={text!r}: expected an object with a 'cluster' object and a 'task' "
            'object, e.g. {"cluster": {"ps": [...], "worker": [...]}, "task": {"type": '
            '"worker", "index": 0}}.'
        )
    if "cluster" not in config and "sparseCluster" in config:
        raise ClusterConfigError(
            f"{TF_CONFIG} has a 'sparseCluster' and no 'cluster' (a TFJob with "
            "enableDynamicWorker: true): every EASGD task needs the whole cluster, the chief "
            "to wait for every worker; set enableDynamicWorker: false."
        )
    rpc_layer = config.get("rpc_layer", "grpc")
    if rpc_layer not in ("grpc", "", None):
        raise ClusterConfigError(
            f"{TF_CONFIG} rpc_layer={rpc_layer!r}: the tasks' servers speak 'grpc' only."
        )
    cluster = _cluster_hosts(config.get("cluster", {}))
    task_type, task_index = _task(config.get("task"), cluster)
    return TFConfig(cluster, task_type, task_index, text)


def cluster_from_tf_config(tf_config=None, environ=None):
    """Describes this process's task by TF_CONFIG, as Kubernetes' training operator writes it.

    `TF_CONFIG` looks like `{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"],
    "ps": ["h2:2222"]}, "task": {"type": "worker", "index": 0}}` (the operator adds
    `"environment": "cloud"`, and an `evaluator` entry for Evaluator replicas). The `chief`
    (or `master`) is worker 0 and worker i is worker i + 1 (without a chief, worker i is
    worker i); an `evaluator` entry of the cluster is ignored.

    Args:
        tf_config: the JSON text; None reads the variable from `environ`.
        environ: the environment (default `os.environ`).

    Returns:
        A `ClusterTask` with `source="TF_CONFIG"`.

    Raises:
        TypeError: if `tf_config` is neither a string nor None.
        ClusterConfigError: naming TF_CONFIG, the offending part and its value.
    """
    config = read_tf_config(tf_config, environ)
    if config is None:
        raise ClusterConfigError(
            f"{TF_CONFIG} is not set (or empty): expected the JSON of the cluster and the task."
        )
    return config.easgd_task()


def _cluster_hosts(cluster):
    """Checks the `cluster` object of TF_CONFIG; returns `{task type: tuple of addresses}`."""
    unknown = sorted(set(cluster) - set(TF_CONFIG_TYPES))
    if unknown:
        raise ClusterConfigError(
            f"{TF_CONFIG} cluster has job(s) {unknown}; the task types are "
            f"{sorted(TF_CONFIG_TYPES)}."
        )
    hosts = {}
    for job in TF_CONFIG_TYPES:
        if job not in cluster:
            continue
        value = cluster[job]
        if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
            raise ClusterConfigError(
                f"{TF_CONFIG} cluster.{job}={value!r}: expected a list of host:port strings."
            )
        for host in value:
            check_address(host, f"{TF_CONFIG} cluster.{job}", json.dumps(value))
        hosts[job] = tuple(value)
    chiefs = [h for job in CHIEF_TYPES for h in hosts.get(job, ())]
    if len(chiefs) > 1:
        shown = {job: list(hosts[job]) for job in CHIEF_TYPES if job in hosts}
        raise ClusterConfigError(
            f"{TF_CONFIG} cluster {shown}: at most one chief (or master) is allowed."
        )
    check_unique(
        [h for job in hosts for h in hosts[job]], f"{TF_CONFIG} cluster", json.dumps(cluster)
    )
    return hosts


def _task(task, cluster):
    """Checks the `task` object of TF_CONFIG; returns `(task type, index)`, or `(None, 0)`."""
    if task is None:
        return None, 0
    if not isinstance(task, dict):
        raise ClusterConfigError(
            f'{TF_CONFIG} task={task!r}: expected an object like {{"type": "worker", "index": 0}}.'
        )
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type is None and not cluster:
        return None, 0  # Neither cluster nor task type: local training, nothing to check.
    if task_type not in TF_CONFIG_TYPES:
        raise ClusterConfigError(
            f"{TF_CONFIG} task.type={task_type!r}: the task types are {sorted(TF_CONFIG_TYPES)}."
        )
    if isinstance(index, bool) or not isinstance(index, int):
        raise ClusterConfigError(f"{TF_CONFIG} task.index={index!r}: expected an integer.")
    if not cluster or task_type == EVALUATOR:
        if index < 0:
            raise ClusterConfigError(f"{TF_CONFIG} task.index={index}: must be >= 0.")
        return task_type, index
    size = len(cluster.get(task_type, ()))
    if not size:
        present = sorted(job for job, hosts in cluster.items() if hosts)
        raise ClusterConfigError(
            f"{TF_CONFIG} task.type={task_type!r}: the cluster has no {task_type!r} task "
            f"(cluster.{task_type} is missing or empty; it has {present}), so this task is "
            "not part of it."
        )
    if not 0 <= index < size:
        raise ClusterConfigError(
            f"{TF_CONFIG} task.index={index}: cluster.{task_type} has {size} task(s), so the "
            f"index must be in [0, {size})."
        )
    return task_type, index


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
        ValueError: if `tf_config` is no valid TF_CONFIG (a `ClusterConfigError`).
    """
    config = read_tf_config(tf_config)
    return max(1, config.num_trainers if config else 0)


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
        ValueError: if `tf_config` is no valid TF_CONFIG, e.g. its training task is not in
            its cluster (a `ClusterConfigError` naming TF_CONFIG's key and value).
    """
    config = read_tf_config(tf_config)
    if config is None or not config.cluster or config.task_type not in TRAINER_TYPES:
        return None
    import tensorflow as tf  # noqa: PLC0415 (see the module docstring)
    from tensorflow.core.protobuf import rewriter_config_pb2  # noqa: PLC0415

    if config.task_type in CHIEF_TYPES:  # The filters of RunConfig's default, task by task.
        own = f"/job:{config.task_type}"
    else:
        own = f"/job:{WORKER}/task:{config.task_index}"
    rewrite = rewriter_config_pb2.RewriterConfig(
        meta_optimizer_iterations=rewriter_config_pb2.RewriterConfig.ONE
    )
    return tf.compat.v1.ConfigProto(
        allow_soft_placement=True,
        graph_options=tf.compat.v1.GraphOptions(rewrite_options=rewrite),
        device_filters=[f"/job:{PS}", own],
        share_cluster_devices_in_session=True,
    )
