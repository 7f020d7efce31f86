"""OS processes of a test's job: liveness, the environment of children, easgd-train's
console script and tasks, and Python scripts run in a fresh interpreter."""

import os
import subprocess
import sys
import time

import portpicker
import psutil

from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.trainer import cluster


def process_alive(pid):
    """Whether process `pid` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for_exit(pids, timeout_secs=15.0):
    """Returns the pids still alive after at most `timeout_secs`."""
    deadline = time.monotonic() + timeout_secs
    while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if process_alive(pid)]


def child_env(**extra):
    """The environment of a TensorFlow child process: quiet logs, no inherited TF_CONFIG.

    Args:
        **extra: Variables to set on top (a TF_CONFIG among them is kept).
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def easgd_train_script():
    """The path of the venv's `easgd-train` console script (beside this interpreter)."""
    path = os.path.join(os.path.dirname(sys.executable), "easgd-train")
    assert os.path.exists(path), "install the package: pip install -e '.[test]'"
    return path


def run_python_script(source, tmp_path, timeout_secs=240):
    """Runs `source` as `tmp_path/script.py` in a fresh interpreter, in `tmp_path`.

    Without TF_USE_LEGACY_KERAS in its environment, so that the script decides which Keras
    TensorFlow loads.

    Returns:
        The `subprocess.CompletedProcess`, with its output as text.
    """
    script = tmp_path / "script.py"
    script.write_text(source)
    env = child_env()
    env.pop("TF_USE_LEGACY_KERAS", None)
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_secs,
        check=False,
    )


def easgd_train_tasks(flags, tasks=(("ps", 0), ("worker", 0), ("worker", 1)), num_workers=2):
    """`launcher.TaskSpec`s of an easgd-train job in task mode, one ps, on free ports.

    Args:
        flags: the training flags every task gets.
        tasks: `(job, index)` of the tasks to make, in the order the launcher starts them.
        num_workers: workers in the cluster.
    """
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
