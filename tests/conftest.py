"""Shared fixtures: the two variable worlds and one in-process gRPC cluster."""

import contextlib
import os
import sys
import time
import uuid

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every gRPC server of a process runs its ops on one process-wide inter-op thread pool,
# as many threads as cores by default (2 here). The first exchange of each worker parks
# one of those threads in `RemoteCall` until the parameter server has registered the
# exchange function, and the parameter server needs a thread of the same pool to do it.
# With the ps and two workers in this one process (tests/test_task.py), two first
# exchanges at once took both threads and the job deadlocked. Processes of a real job
# each have their own pool; tests that put a cluster in one process need more threads.
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "16")

import portpicker  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Blocking ops (queue barriers, remote reads) fail after this long instead of hanging a test.
OPERATION_TIMEOUT_MS = 20_000


@pytest.fixture(params=["tf1", "tf2"])
def world(request):
    """Runs the test in TF1 mode (ref variables) and in TF 2 graph mode (resource variables).

    Yields:
        "tf1" or "tf2". Tests build their graphs in `tf.Graph().as_default()` blocks, so
        the process-wide default graph stays empty and the switch can be undone.
    """
    if request.param == "tf1":
        tf.compat.v1.disable_v2_behavior()
        try:
            yield "tf1"
        finally:
            tf.compat.v1.reset_default_graph()  # Eager mode comes back only on a fresh one.
            tf.compat.v1.enable_v2_behavior()
    else:
        yield "tf2"


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
        then call the ps directly; tf_contrib_easgd/transport.py).
        """
        return tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", f"/job:worker/task:{index}"],
            operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
            share_cluster_devices_in_session=share_devices,
        )

    def session(self, index, graph, share_devices=False):
        """A session of worker `index` on `graph` (see `session_config`)."""
        return tf.compat.v1.Session(
            self.target(index), graph=graph, config=self.session_config(index, share_devices)
        )


@pytest.fixture(scope="session")
def cluster():
    """Two ps tasks and two workers, shared by the test session."""
    return InProcessCluster(num_ps=2, num_workers=2)


@pytest.fixture
def container():
    """A container name of the test's own, so that cluster state never leaks between tests."""
    return f"test{uuid.uuid4().hex}"  # Letters and digits only.


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


def process_alive(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for_exit(pids, timeout_secs=15.0):
    """Returns the pids still alive after at most `timeout_secs`."""
    deadline = time.monotonic() + timeout_secs
    while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if process_alive(pid)]


def child_env():
    """The environment of a TensorFlow child process: quiet logs, no inherited TF_CONFIG."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    return env


def easgd_train_tasks(flags, tasks=(("ps", 0), ("worker", 0), ("worker", 1)), num_workers=2):
    """`launcher.TaskSpec`s of an easgd-train job in task mode, one ps, on free ports.

    Args:
        flags: the training flags every task gets.
        tasks: `(job, index)` of the tasks to make, in the order the launcher starts them.
        num_workers: workers in the cluster.
    """
    # Imported here: at module level `cluster` would clash with the fixture of that name.
    from tf_contrib_easgd.trainer import cluster, launcher  # noqa: PLC0415

    ps_hosts = (f"localhost:{portpicker.pick_unused_port()}",)
    worker_hosts = tuple(f"localhost:{portpicker.pick_unused_port()}" for _ in range(num_workers))
    command = (sys.executable, "-m", "tf_contrib_easgd.trainer", "--progress_format=json", *flags)
    return [
        launcher.TaskSpec(
            job,
            index,
            command + tuple(cluster.TaskConfig(ps_hosts, worker_hosts, job, index).to_flags()),
            finishes=job == cluster.WORKER,
        )
        for job, index in tasks
    ]


@pytest.fixture
def legacy_processes(tmp_path):
    """A `legacy_jobs.Processes` in `tmp_path`, its processes killed however the test ends."""
    import legacy_jobs  # noqa: PLC0415 (only the tests that run legacy scripts need it)

    started = legacy_jobs.Processes(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()
