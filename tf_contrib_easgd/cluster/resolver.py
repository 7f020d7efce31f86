"""The cluster of a ps/worker job and this process's task in it, as a `ClusterTask`.

What a launcher gives a process becomes a `ClusterTask` in one place: host lists here (the
classic TF1 flags, `cluster_from_hosts`), `TF_CONFIG` in `tf_config` (Kubernetes' training
operator, `tf.estimator`) and a Slurm job step in `slurm`. Bad input raises
`ClusterConfigError` naming the flag, key or variable and its value. No TensorFlow until
`ClusterTask.cluster_spec()`.
"""

import dataclasses

PS = "ps"
WORKER = "worker"
#: The two jobs of an EASGD cluster; worker 0 is the chief.
JOBS = (PS, WORKER)


class ClusterConfigError(ValueError):
    """Flags, TF_CONFIG or the Slurm variables describe no valid cluster; the message says which."""


@dataclasses.dataclass(frozen=True)
class ClusterTask:
    """The cluster of an EASGD job and the task this process runs in it.

    Attributes:
        ps_hosts: `host:port` of each parameter server, in task order.
        worker_hosts: `host:port` of each worker, in task order (worker 0 is the chief).
        job_name: `"ps"` or `"worker"`.
        task_index: index of this task within its job.
        source: where the description came from: `"flags"`, `"TF_CONFIG"` or `"Slurm"`.
        origin: where this task's address came from, for messages, e.g. `"--worker_hosts"`
            or `"TF_CONFIG cluster.chief[0]"` (not compared).
    """

    ps_hosts: tuple
    worker_hosts: tuple
    job_name: str
    task_index: int
    source: str = "flags"
    origin: str = dataclasses.field(default="", compare=False)

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

    def cluster_spec(self):
        """Returns the `tf.compat.v1.train.ClusterSpec` of the job (imports TensorFlow)."""
        import tensorflow as tf  # noqa: PLC0415 (see the module docstring)

        return tf.compat.v1.train.ClusterSpec(self.cluster_dict())


def check_address(address, name, value=None):
    """Checks that `address` is `host:port` (IPv6 hosts in brackets, `[::1]:2222`).

    Args:
        address: the address to check.
        name: the flag, key or variable it came from, for messages.
        value: the whole value of `name`, for messages; defaults to `address`.

    Raises:
        ClusterConfigError: if `address` is not `host:port` with a port in [1, 65535].
    """
    shown = f"{name}={address if value is None else value!r}"
    if not isinstance(address, str):
        raise ClusterConfigError(f"{shown}: address {address!r} is not a host:port string.")
    host, colon, port = address.rpartition(":")
    if not colon or not host or host in "[]" or any(c.isspace() for c in address):
        raise ClusterConfigError(f"{shown}: address {address!r} is not of the form host:port.")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ClusterConfigError(
            f"{shown}: address {address!r} has port {port!r}; a port is a number in [1, 65535]."
        )


def check_unique(hosts, name, value):
    """Raises ClusterConfigError if an address occurs twice in `hosts`."""
    seen = set()
    for host in hosts:
        if host in seen:
            raise ClusterConfigError(f"{name}={value!r}: address {host!r} is listed twice.")
        seen.add(host)


def parse_hosts(value, name):
    """Parses a comma-separated list of `host:port` addresses (or a list of them).

    Args:
        value: e.g. `"ps0.example.com:2222,ps1.example.com:2222"`, or a list of addresses.
        name: the name of the flag or argument `value` came from, for messages.

    Returns:
        A tuple of the addresses, in order.

    Raises:
        ClusterConfigError: if `value` is empty, an address is not `host:port` with a port
            in [1, 65535], or an address is listed twice.
    """
    if isinstance(value, (list, tuple)) and value:
        value = ",".join(value) if all(isinstance(h, str) for h in value) else value
    if not isinstance(value, str) or not value.strip():
        raise ClusterConfigError(
            f"{name}={value!r}: expected a comma-separated list of host:port addresses."
        )
    hosts = tuple(part.strip() for part in value.split(","))
    for host in hosts:
        check_address(host, name, value)
    check_unique(hosts, name, value)
    return hosts


def cluster_from_hosts(job_name, task_index, ps_hosts, worker_hosts, *, flag_prefix=""):
    """Describes a task by the classic TF1 flags: its job, its index, every task's address.

    Args:
        job_name: `"ps"` or `"worker"`.
        task_index: index of this task in its job.
        ps_hosts: `host:port` of every parameter server, comma-separated (or a list).
        worker_hosts: `host:port` of every worker, the chief first, comma-separated (or a
            list).
        flag_prefix: put before the argument names in messages: `"--"` names the flags.

    Returns:
        A `ClusterTask` with `source="flags"`.

    Raises:
        ClusterConfigError: naming the argument and its value, if one is missing or invalid.
    """
    names = {
        key: flag_prefix + key for key in ("job_name", "task_index", "ps_hosts", "worker_hosts")
    }
    if job_name not in JOBS:
        raise ClusterConfigError(f"{names['job_name']}={job_name!r}: expected one of {list(JOBS)}.")
    ps = parse_hosts(ps_hosts, names["ps_hosts"])
    workers = parse_hosts(worker_hosts, names["worker_hosts"])
    shared = sorted(set(ps) & set(workers))
    if shared:
        raise ClusterConfigError(
            f"{names['ps_hosts']} and {names['worker_hosts']} share the address(es) {shared}."
        )
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise ClusterConfigError(f"{names['task_index']}={task_index!r}: expected an integer.")
    hosts_name = names["ps_hosts"] if job_name == PS else names["worker_hosts"]
    size = len(ps) if job_name == PS else len(workers)
    if not 0 <= task_index < size:
        raise ClusterConfigError(
            f"{names['task_index']}={task_index}: job {job_name!r} has {size} task(s) in "
            f"{hosts_name}, so the index must be in [0, {size})."
        )
    return ClusterTask(ps, workers, job_name, task_index, "flags", hosts_name)
