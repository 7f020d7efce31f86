"""The cluster of an easgd-train job: host lists from flags or TF_CONFIG, roles, sessions.

A job has parameter servers (job `ps`), which hold the centre, and workers (job
`worker`), which train; worker 0 is the chief. `TaskConfig` describes the cluster and the
one task this process runs. It is built from the flags `--job_name --task_index
--ps_hosts --worker_hosts` (`from_flags`) or from the `TF_CONFIG` environment variable
that Kubernetes TFJob operators and Estimator set (`from_tf_config`). A TF_CONFIG
`chief` task becomes worker 0 and TF_CONFIG worker i becomes worker i + 1.

Parsing needs no TensorFlow: the local launcher validates a job without paying for the
TensorFlow import; only `cluster_spec()` and `session_config()` import it.
"""

import dataclasses
import json

PS = "ps"
WORKER = "worker"
JOBS = (PS, WORKER)

#: TF_CONFIG task types easgd-train runs, and the job each one maps to.
TF_CONFIG_TYPES = {"chief": WORKER, "worker": WORKER, "ps": PS}

#: Environment variable of the TFJob / Estimator cluster convention.
TF_CONFIG = "TF_CONFIG"


class ClusterConfigError(ValueError):
    """A flag or TF_CONFIG does not describe a valid cluster; the message names which."""


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The cluster of a job and the task this process runs in it.

    Attributes:
        ps_hosts: `host:port` of each parameter server, in task order.
        worker_hosts: `host:port` of each worker, in task order (worker 0 is the chief).
        job_name: `"ps"` or `"worker"`.
        task_index: index of this task within its job.
        source: where the description came from (`"flags"`, `"TF_CONFIG"`, `"local"`),
            for messages.
    """

    ps_hosts: tuple
    worker_hosts: tuple
    job_name: str
    task_index: int
    source: str = "flags"

    @property
    def num_ps(self):
        """Number of parameter servers."""
        return len(self.ps_hosts)

    @property
    def num_workers(self):
        """Number of workers."""
        return len(self.worker_hosts)

    @property
    def is_ps(self):
        """Whether this task is a parameter server."""
        return self.job_name == PS

    @property
    def is_chief(self):
        """Whether this task is the chief, worker 0."""
        return self.job_name == WORKER and self.task_index == 0

    @property
    def name(self):
        """A short name of the task for messages, e.g. `"worker 1"`."""
        return f"{self.job_name} {self.task_index}"

    @property
    def device(self):
        """The device string of this task, e.g. `"/job:worker/task:1"`."""
        return f"/job:{self.job_name}/task:{self.task_index}"

    @property
    def address(self):
        """The `host:port` this task's server listens on."""
        return (self.ps_hosts if self.is_ps else self.worker_hosts)[self.task_index]

    def cluster_dict(self):
        """Returns `{"ps": [...], "worker": [...]}`, the argument of a `ClusterSpec`."""
        return {PS: list(self.ps_hosts), WORKER: list(self.worker_hosts)}

    def device_filters(self):
        """Returns the devices this task's sessions may depend on.

        A worker talks to the parameter servers and itself only, so its session can be
        created (and keeps running) while any other worker is down or not started yet. A
        parameter server's own session (which waits for the end of the job) needs itself
        only.
        """
        if self.is_ps:
            return [self.device]
        return [f"/job:{PS}", self.device]

    def cluster_spec(self):
        """Returns the `tf.compat.v1.train.ClusterSpec` of the job."""
        import tensorflow as tf  # noqa: PLC0415 (see the module docstring)

        return tf.compat.v1.train.ClusterSpec(self.cluster_dict())

    def session_config(self, operation_timeout_secs=None):
        """Returns the `tf.compat.v1.ConfigProto` of this task's server and sessions.

        It sets `device_filters` (see `device_filters()`); without them a worker's session
        contacts every task of the cluster and cannot be created while another worker is
        down. A worker's config also has `share_cluster_devices_in_session`, which lets
        its exchanges call the parameter servers directly (the cheaper transport of
        `tf_contrib_easgd/transport.py`).

        Args:
            operation_timeout_secs: if given, a blocking op (a queue, a barrier, a read from
                a task that is gone) fails after this long instead of waiting forever.
        """
        import tensorflow as tf  # noqa: PLC0415 (see the module docstring)

        config = tf.compat.v1.ConfigProto(
            device_filters=self.device_filters(), share_cluster_devices_in_session=not self.is_ps
        )
        if operation_timeout_secs is not None:
            config.operation_timeout_in_ms = max(int(operation_timeout_secs * 1000), 1)
        return config

    def to_flags(self):
        """Returns the command-line flags that describe this task to easgd-train."""
        return [
            f"--job_name={self.job_name}",
            f"--task_index={self.task_index}",
            f"--ps_hosts={','.join(self.ps_hosts)}",
            f"--worker_hosts={','.join(self.worker_hosts)}",
        ]


def parse_hosts(value, flag):
    """Parses a comma-separated list of `host:port` addresses.

    Args:
        value: e.g. `"ps0.example.com:2222,ps1.example.com:2222"`.
        flag: the name of the flag or key `value` came from, for messages.

    Returns:
        A tuple of the addresses, in order.

    Raises:
        ClusterConfigError: if `value` is empty or an address is not `host:port` with a
            port in [1, 65535], or an address is listed twice.
    """
    if not isinstance(value, str) or not value.strip():
        raise ClusterConfigError(
            f"{flag}={value!r}: expected a comma-separated list of host:port addresses."
        )
    hosts = tuple(part.strip() for part in value.split(","))
    for host in hosts:
        check_address(host, flag, value)
    _check_unique(hosts, flag, value)
    return hosts


def check_address(address, flag, value=None):
    """Checks that `address` is `host:port` (IPv6 hosts in brackets, `[::1]:2222`).

    Args:
        address: the address to check.
        flag: the flag or key it came from, for messages.
        value: the whole value of `flag`, for messages; defaults to `address`.

    Raises:
        ClusterConfigError: if `address` is not `host:port` with a port in [1, 65535].
    """
    shown = f"{flag}={address if value is None else value!r}"
    if not isinstance(address, str):
        raise ClusterConfigError(f"{shown}: address {address!r} is not a host:port string.")
    host, colon, port = address.rpartition(":")
    if not colon or not host or host in "[]" or any(c.isspace() for c in address):
        raise ClusterConfigError(f"{shown}: address {address!r} is not of the form host:port.")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ClusterConfigError(
            f"{shown}: address {address!r} has port {port!r}; a port is a number in [1, 65535]."
        )


def _check_unique(hosts, flag, value):
    """Raises ClusterConfigError if an address occurs twice in `hosts`."""
    seen = set()
    for host in hosts:
        if host in seen:
            raise ClusterConfigError(f"{flag}={value!r}: address {host!r} is listed twice.")
        seen.add(host)


def from_flags(job_name, task_index, ps_hosts, worker_hosts):
    """Builds the task description from the task-mode flags.

    Args:
        job_name: value of `--job_name`, `"ps"` or `"worker"`.
        task_index: value of `--task_index`.
        ps_hosts: value of `--ps_hosts`, comma-separated `host:port` addresses.
        worker_hosts: value of `--worker_hosts`, comma-separated `host:port` addresses.

    Returns:
        A `TaskConfig` with `source="flags"`.

    Raises:
        ClusterConfigError: naming the flag and its value, if one is missing or invalid.
    """
    if job_name not in JOBS:
        raise ClusterConfigError(f"--job_name={job_name!r}: expected one of {list(JOBS)}.")
    ps = parse_hosts(ps_hosts, "--ps_hosts")
    workers = parse_hosts(worker_hosts, "--worker_hosts")
    _check_disjoint(ps, workers, "--ps_hosts and --worker_hosts")
    size = len(ps) if job_name == PS else len(workers)
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise ClusterConfigError(f"--task_index={task_index!r}: expected an integer.")
    if not 0 <= task_index < size:
        hosts_flag = "--ps_hosts" if job_name == PS else "--worker_hosts"
        raise ClusterConfigError(
            f"--task_index={task_index}: job {job_name!r} has {size} task(s) in {hosts_flag}, "
            f"so the index must be in [0, {size})."
        )
    return TaskConfig(ps, workers, job_name, task_index, source="flags")


def from_tf_config(text):
    """Builds the task description from the JSON value of the `TF_CONFIG` variable.

    `TF_CONFIG` looks like `{"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222"],
    "ps": ["h2:2222"]}, "task": {"type": "worker", "index": 0}}`. The `chief` task (at
    most one) is worker 0 and worker i of TF_CONFIG is worker i + 1 (without a chief,
    worker 0 is the chief and indices are kept). An `evaluator` entry of the cluster is
    ignored; other keys are rejected.

    Args:
        text: the JSON string.

    Returns:
        A `TaskConfig` with `source="TF_CONFIG"`.

    Raises:
        ClusterConfigError: naming TF_CONFIG, the offending part and its value.
    """
    try:
        config = json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise ClusterConfigError(f"{TF_CONFIG}={text!r} is not valid JSON: {error}.") from None
    if not isinstance(config, dict) or not isinstance(config.get("cluster"), dict):
        raise ClusterConfigError(
            f"{TF_CONFIG}={text!r}: expected an object with a 'cluster' object and a 'task' "
            'object, e.g. {"cluster": {"ps": [...], "worker": [...]}, "task": {"type": '
            '"worker", "index": 0}}.'
        )
    lists = _tf_config_hosts(config["cluster"])
    workers = lists["chief"] + lists["worker"]
    job, index = _tf_config_task(config.get("task"), lists)
    return TaskConfig(lists["ps"], workers, job, index, source=TF_CONFIG)


def _tf_config_hosts(cluster):
    """Checks the `cluster` object of TF_CONFIG; returns `{task type: tuple of addresses}`."""
    unknown = sorted(set(cluster) - set(TF_CONFIG_TYPES) - {"evaluator"})
    if unknown:
        raise ClusterConfigError(
            f"{TF_CONFIG} cluster has job(s) {unknown}; easgd-train knows "
            f"{sorted(TF_CONFIG_TYPES)} (and ignores 'evaluator')."
        )
    lists = {}
    for job in TF_CONFIG_TYPES:
        hosts = cluster.get(job, [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ClusterConfigError(
                f"{TF_CONFIG} cluster.{job}={hosts!r}: expected a list of host:port strings."
            )
        for host in hosts:
            check_address(host, f"{TF_CONFIG} cluster.{job}", json.dumps(hosts))
        lists[job] = tuple(hosts)
    if len(lists["chief"]) > 1:
        raise ClusterConfigError(
            f"{TF_CONFIG} cluster.chief={list(lists['chief'])!r}: at most one chief is allowed."
        )
    if not lists["ps"]:
        raise ClusterConfigError(f"{TF_CONFIG} cluster has no 'ps' task; EASGD needs at least 1.")
    workers = lists["chief"] + lists["worker"]
    if not workers:
        raise ClusterConfigError(f"{TF_CONFIG} cluster has no 'chief' or 'worker' task.")
    _check_unique(lists["ps"] + workers, f"{TF_CONFIG} cluster", json.dumps(cluster))
    return lists


def _tf_config_task(task, lists):
    """Checks the `task` object of TF_CONFIG; returns easgd-train's `(job_name, task_index)`.

    Args:
        task: the value of TF_CONFIG's `task`.
        lists: the addresses of each task type, as `_tf_config_hosts` returns them.
    """
    if not isinstance(task, dict):
        raise ClusterConfigError(
            f'{TF_CONFIG} task={task!r}: expected an object like {{"type": "worker", "index": 0}}.'
        )
    task_type, index = task.get("type"), task.get("index", 0)
    if task_type not in TF_CONFIG_TYPES:
        raise ClusterConfigError(
            f"{TF_CONFIG} task.type={task_type!r}: easgd-train runs the types "
            f"{sorted(TF_CONFIG_TYPES)}."
        )
    if isinstance(index, bool) or not isinstance(index, int):
        raise ClusterConfigError(f"{TF_CONFIG} task.index={index!r}: expected an integer.")
    size = len(lists[task_type])
    if not size:
        present = sorted(job for job, hosts in lists.items() if hosts)
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
    if task_type == "worker":
        index += len(lists["chief"])
    return TF_CONFIG_TYPES[task_type], index


def _check_disjoint(ps, workers, what):
    """Raises ClusterConfigError if an address is both a ps and a worker."""
    shared = sorted(set(ps) & set(workers))
    if shared:
        raise ClusterConfigError(f"{what} share the address(es) {shared}.")
