"""Shared fixtures of every tier: the two variable worlds, one in-process cluster, a container,
the processes of legacy scripts, tmpfs mounts.

The helpers that tests import live in tests/support (`clusters`: in-process servers and
variable scopes; `processes`: OS processes of a job; ...), which this file puts on
`sys.path`, so that every tier imports them by their bare names (`from clusters import
...`); under Bazel the `support` target's `imports` does the same. No child process of a
test imports them. tests/README.md describes the tiers.
"""

import os
import pathlib
import sys
import uuid

SUPPORT = str(pathlib.Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every gRPC server of a process runs its ops on one process-wide inter-op thread pool,
# as many threads as cores by default (2 here). The first exchange of each worker parks
# one of those threads in `RemoteCall` until the parameter server has registered the
# exchange function, and the parameter server needs a thread of the same pool to do it.
# With the ps and two workers in this one process (tests/cluster/test_task_cluster.py), two first
# exchanges at once took both threads and the job deadlocked. Processes of a real job
# each have their own pool; tests that put a cluster in one process need more threads.
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "16")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from clusters import InProcessCluster  # noqa: E402

# TensorFlow makes a thread's stack of execution contexts when the thread first enters a
# graph, with eager mode at its bottom only if eager execution is on at that moment. Made
# in TF1 mode (the `world` fixture's "tf1"), the stack never gains it: after
# enable_v2_behavior, code in a FuncGraph asks whether eager execution is on outside
# functions and hears no, and on TF 2.15 Keras 2's `Input` then makes a graph placeholder
# and a Sequential model fails ("Output tensors of a Sequential model must be the output of
# a TensorFlow `Layer`"). Entering a graph here, in eager mode, makes the stack first.
with tf.Graph().as_default():
    pass


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


@pytest.fixture(scope="session")
def cluster():
    """Two ps tasks and two workers, shared by the test session."""
    return InProcessCluster(num_ps=2, num_workers=2)


@pytest.fixture
def container():
    """A container name of the test's own, so that cluster state never leaks between tests."""
    return f"test{uuid.uuid4().hex}"  # Letters and digits only.


@pytest.fixture
def legacy_processes(tmp_path):
    """A `legacy_jobs.Processes` in `tmp_path`, its processes killed however the test ends."""
    import legacy_jobs  # noqa: PLC0415 (only the tests that run legacy scripts need it)

    started = legacy_jobs.Processes(tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


@pytest.fixture
def mount_tmpfs(tmp_path):
    """Mounts tmpfs file systems under `tmp_path`: `mount_tmpfs(size, read_only=False)`.

    Skips the test where that is impossible (not root, no `mount`, a container that forbids
    it); unmounts everything it mounted however the test ends (`bad_disks.tmpfs_mounts`).
    """
    import bad_disks  # noqa: PLC0415 (only the tests of bad disks need it)

    with bad_disks.tmpfs_mounts(tmp_path) as mount:
        yield mount
