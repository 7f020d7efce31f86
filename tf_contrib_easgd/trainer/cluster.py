"""The cluster of an easgd-train job: the task to run, from flags, TF_CONFIG or Slurm; sessions.

A job has parameter servers (job `ps`), which hold the centre, and workers (job
`worker`), which train; worker 0 is the chief. `TaskConfig` describes the cluster and the
one task this process runs. The library reads it (`tf_contrib_easgd.ClusterTask` and its
`cluster_from_*` functions, the one place that does): from the flags `--job_name
--task_index --ps_hosts --worker_hosts` (`from_flags`), from the `TF_CONFIG` variable that
Kubernetes' training operator and Estimator set (`from_tf_config`: its `chief` is worker 0,
its worker i worker i + 1), or from a Slurm job step (`from_slurm`: the first `--ps` tasks
are the parameter servers). This module adds what the trainer's tasks need: their session
config and their command-line flags.

Parsing needs no TensorFlow: the local launcher validates a job without paying for the
TensorFlow import; only `cluster_spec()` and `session_config()` import it.
"""

import dataclasses

from tf_contrib_easgd import (
    ClusterConfigError,
    ClusterTask,
    cluster_from_hosts,
    cluster_from_slurm,
    cluster_from_tf_config,
)

__all__ = ["ClusterConfigError", "TaskConfig", "from_flags", "from_slurm", "from_tf_config"]

PS = "ps"
WORKER = "worker"
JOBS = (PS, WORKER)

#: Environment variable of the TFJob / Estimator cluster convention.
TF_CONFIG = "TF_CONFIG"
#: `TaskConfig.source` of a task read from a Slurm job step.
SLURM = "Slurm"


@dataclasses.dataclass(frozen=True)
class TaskConfig(ClusterTask):
    """The cluster of a job and the task this process runs in it (see `ClusterTask`)."""

    @classmethod
    def of(cls, task):
        """Returns the `TaskConfig` of the library's `ClusterTask` `task`."""
        return cls(**{field.name: getattr(task, field.name) for field in dataclasses.fields(task)})

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
    task = cluster_from_hosts(job_name, task_index, ps_hosts, worker_hosts, flag_prefix="--")
    return TaskConfig.of(task)


def from_tf_config(text):
    """Builds the task description from the JSON value of the `TF_CONFIG` variable.

    Raises:
        ClusterConfigError: naming TF_CONFIG, the offending part and its value.
    """
    return TaskConfig.of(cluster_from_tf_config(text))


def from_slurm(num_ps, environ, port_base=None):
    """Builds the task description of this task of a Slurm job step (`srun`).

    Args:
        num_ps: value of `--ps`: the step's first `num_ps` tasks are the parameter servers.
        environ: the environment, with the `SLURM_*` variables of the step.
        port_base: value of `--slurm_port_base`; None: the default of the job.

    Raises:
        ClusterConfigError: naming the variable or flag and its value.
    """
    task = cluster_from_slurm(
        num_ps, environ, port_base, num_ps_name="--ps", port_base_name="--slurm_port_base"
    )
    return TaskConfig.of(task)
