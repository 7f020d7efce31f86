"""In-process gRPC clusters and the scopes of a worker's graph, for the cluster tests."""

import contextlib

import portpicker
import tensorflow as tf

# Blocking ops (queue barriers, remote reads) fail after this long instead of hanging a test.
OPERATION_TIMEOUT_MS = 20_000


def is_resource(variable):
    """Whether `variable` is a resource variable (TF 2 world) rather than a ref variable."""
    return "resource" in variable.handle.dtype.name if hasattr(variable, "handle") else False


class InProcessCluster:
    """Parameter servers and workers as `tf.compat.v1.train.Server`s on loopback ports.

    Servers cannot be stopped in-process, so one cluster serves the whole test session;
    tests keep their state apart with a `tf.compat.v1.container` of their own.
    """

    def __init__(self, num_ps, num_workers, dead_workers=0):
        """Starts the servers.

        Args:
            num_ps: number of parameter servers.
            num_workers: number of workers with a running server.
            dead_workers: number of further workers listed in the ClusterSpec whose
                addresses have no server (a worker that is down).
        """
        addresses = [f"localhost:{portpicker.pick_unused_port()}" for _ in range(num_ps)]
        workers = [
            f"localhost:{portpicker.pick_unused_port()}" for _ in range(num_workers + dead_workers)
        ]
        self.spec = tf.train.ClusterSpec({"ps": addresses, "worker": workers})
        self.servers = {
            (job, index): tf.distribute.Server(self.spec, job_name=job, task_index=index)
            for job, count in (("ps", num_ps), ("worker", num_workers))
            for index in range(count)
        }

    def target(self, index):
        """The session target of worker `index`."""
        return self.servers["worker", index].target

    def session_config(self, index, share_devices=False):
        """A ConfigProto that lets worker `index` see only the ps tasks and itself.

        With `share_devices`, it also has `share_cluster_devices_in_session` (exchanges can
        then call the ps directly; tf_contrib_easgd/exchange/transport.py).
        """
        return tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{index}"],
            operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
            share_cluster_devices_in_session=share_devices,
        )

    def monitored_session(self, index, hook, share_devices=False):
        """TensorFlow's `MonitoredTrainingSession` of worker `index` (the chief: 0) with
        `hook`, no checkpoints or summaries (see `session_config`)."""
        return tf.compat.v1.train.MonitoredTrainingSession(
            master=self.target(index),
            is_chief=index == 0,
            hooks=[hook],
            config=self.session_config(index, share_devices),
            log_step_count_steps=None,
            save_summaries_steps=None,
        )

    def session(self, index, graph, share_devices=False):
        """A session of worker `index` on `graph` (see `session_config`)."""
        return tf.compat.v1.Session(
            self.target(index), graph=graph, config=self.session_config(index, share_devices)
        )


def cluster_and_worker_tasks(num_ps, num_workers):
    """A new `InProcessCluster`, and the `tf_contrib_easgd.ClusterTask` of each worker (for
    the eager worker and the Keras callback, which take a task, not a session)."""
    from tf_contrib_easgd import cluster_from_hosts  # noqa: PLC0415 (the library, lazily)

    cluster = InProcessCluster(num_ps=num_ps, num_workers=num_workers)
    spec = cluster.spec.as_dict()
    tasks = [
        cluster_from_hosts("worker", index, spec["ps"], spec["worker"])
        for index in range(num_workers)
    ]
    return cluster, tasks


@contextlib.contextmanager
def worker_scope(cluster_spec, index, getter, container_name):
    """Device, container and variable scopes of worker `index`, as a TF1 script sets them."""
    device = f"/job:worker/task:{index}"
    setter = tf.compat.v1.train.replica_device_setter(worker_device=device, cluster=cluster_spec)
    with (
        tf.compat.v1.container(container_name),
        tf.compat.v1.device(setter),
        tf.compat.v1.variable_scope("", custom_getter=getter),
    ):
        yield
