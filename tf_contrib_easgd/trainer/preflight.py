"""What easgd-train checks on this machine before any TensorFlow server starts.

The flags may be well-formed and still unusable here: a `--model_dir` that cannot be
written (a read-only mount, a path under a regular file, a full disk), a task's port that
another process holds (checkpoints of which none restores: `runner.local` and
`task.check_checkpoints`). `check_before_start` runs those that apply. Each check raises a
`UsageError` that names the flag (or TF_CONFIG) and the value, so that easgd-train exits
with code 2 before it starts anything, instead of failing later in TensorFlow. No
TensorFlow here. docs/RELIABILITY.md, "Bad input on disk and in the environment".
"""

import contextlib
import dataclasses
import errno
import os
import socket
import tempfile

from tf_contrib_easgd.trainer import cluster
from tf_contrib_easgd.trainer.config import UsageError

#: Bytes written to probe `--model_dir`: enough to need a block of a full disk.
PROBE_BYTES = 4096
#: The address TensorFlow's gRPC server listens on: every interface, the task's port.
LISTEN_HOST = "0.0.0.0"


def make_temporary_model_dir():
    """Makes the new temporary directory of a run without `--model_dir`; returns its path.

    Raises:
        UsageError: if it cannot be made.
    """
    try:
        return tempfile.mkdtemp(prefix="easgd-train-")
    except OSError as error:
        raise UsageError(
            f"--model_dir is not given, and no temporary directory can be made in "
            f"{tempfile.gettempdir()!r} ({error.strerror or error}); give --model_dir."
        ) from None


def prepare_model_dir(model_dir):
    """Creates `model_dir` if needed and checks that files can be written there.

    A file of `PROBE_BYTES` is written, synced and removed: permission bits do not tell
    (root ignores them, a read-only mount does not show in them), and a full disk shows only
    when a block is needed.

    Raises:
        UsageError: naming `--model_dir`, its value and the reason.
    """
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"--model_dir={model_dir!r}: cannot create the directory: "
            f"{_why_not_created(model_dir, error)}."
        ) from None
    probe = None
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".easgd-train-probe-", dir=model_dir)
        with os.fdopen(descriptor, "wb") as file:
            file.write(b"\0" * PROBE_BYTES)
            file.flush()
            os.fsync(file.fileno())
    except OSError as error:
        raise UsageError(
            f"--model_dir={model_dir!r}: cannot write there: {error.strerror or error}. "
            "Checkpoints, the export, events and summary.json go there."
        ) from None
    finally:
        if probe is not None:
            with contextlib.suppress(OSError):
                os.remove(probe)


def _why_not_created(path, error):
    """The reason of a failed `os.makedirs(path)`, naming a parent that is a file."""
    parent = os.path.dirname(os.path.abspath(path))
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if error.errno == errno.ENOTDIR and os.path.exists(parent) and not os.path.isdir(parent):
        return f"{parent} is a file, not a directory"
    return error.strerror or str(error)


def check_port(task):
    """Checks that this task's server can listen on its port, as TensorFlow's would.

    Binds the port on every interface with `SO_REUSEADDR` (as gRPC does, so a port whose
    last connections linger in TIME_WAIT, as after a restart, passes) and releases it.

    Args:
        task: the `cluster.TaskConfig` of this process.

    Raises:
        UsageError: naming the task, its address, where it came from and the reason.
    """
    port = int(task.address.rpartition(":")[2])
    if task.source == "flags":  # e.g. 'w0:2222' in --worker_hosts
        flag = task.origin or ("--ps_hosts" if task.is_ps else "--worker_hosts")
        given = f"{task.address!r} in {flag}"
    else:  # e.g. 'w0:2222', TF_CONFIG cluster.chief[0]
        given = f"{task.address!r}, {task.origin}"
    elsewhere = f"give {task.name} another port"
    if task.source == cluster.SLURM:
        elsewhere = "give the job other ports with --slurm_port_base"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LISTEN_HOST, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                reason = (
                    f"port {port} is already in use on this machine (`ss -ltnp 'sport = "
                    f":{port}'` shows by what); stop that process or {elsewhere}"
                )
            else:
                reason = f"cannot listen on port {port}: {error.strerror or error}"
            raise UsageError(f"{task.name} ({given}): {reason}.") from None


def check_before_start(plan):
    """Makes `--model_dir` (a new temporary directory when not given) and checks it, and a
    task's port; returns `plan` with its model_dir.

    Raises:
        UsageError: from the first check that fails.
    """
    model_dir = plan.config.model_dir or make_temporary_model_dir()
    prepare_model_dir(model_dir)
    if plan.task is not None:
        check_port(plan.task)
    return dataclasses.replace(plan, config=dataclasses.replace(plan.config, model_dir=model_dir))
