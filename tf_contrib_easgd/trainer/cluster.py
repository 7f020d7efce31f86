"""The cluster of an easgd-train job and the task this process runs in it: `TaskConfig`.

The library's `ClusterTask` (which reads the task flags, `TF_CONFIG` or a Slurm job step:
`from_flags`, `from_tf_config`, `from_slurm`) with what the trainer's tasks add: their
session config and their command-line flags. No TensorFlow until `cluster_spec()` or
`session_config()`, so that the flags are checked before any process starts.
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
        """Returns the devices this task's sessions may depend on: a worker's, the parameter
        servers and itself (so it runs while another worker is down); a ps's, itself."""
        if self.is_ps:
            return [self.device]
        return [f"/job:{PS}", self.device]

    def session_config(self, operation_timeout_secs=None):
        """Returns the `tf.compat.v1.ConfigProto` of this task's server and sessions.

        Its `device_filters()`; a worker's also `share_cluster_devices_in_session`, with which
        its exchanges call the parameter servers directly (docs/DESIGN.md, "Transports").

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
    """The `TaskConfig` of the values of `--job_name --task_index --ps_hosts --worker_hosts`.

    Raises:
        ClusterConfigError: naming the flag and its value, if one is missing or invalid.
    """
    task = cluster_from_hosts(job_name, task_index, ps_hosts, worker_hosts, flag_prefix="--")
    return TaskConfig.of(task)


def from_tf_config(text):
    """The `TaskConfig` of the JSON value of `TF_CONFIG` (its `chief` is worker 0).

    Raises:
        ClusterConfigError: naming TF_CONFIG, the offending part and its value.
    """
    return TaskConfig.of(cluster_from_tf_config(text))


def from_slurm(num_ps, environ, port_base=None):
    """The `TaskConfig` of this task of a Slurm job step (`srun`).

    Args:
        num_ps: `--ps`: the step's first `num_ps` tasks are the parameter servers.
        environ: the environment, with the step's `SLURM_*` variables.
        port_base: `--slurm_port_base`; None: the job's default.

    Raises:
        ClusterConfigError: naming the variable or flag and its value.
    """
    task = cluster_from_slurm(
        num_ps, environ, port_base, num_ps_name="--ps", port_base_name="--slurm_port_base"
    )
    return TaskConfig.of(task)
