"""Tests of tf_contrib_easgd.runner.launcher, and of the exit code local mode makes of a
failed task (runner.local), with small Python children (no TensorFlow in them)."""

import contextlib
import io
import os
import signal
import sys
import textwrap
import time
import types

import pytest
from processes import process_alive, wait_for_exit

from tf_contrib_easgd.runner import launcher, local
from tf_contrib_easgd.runner.display import Display
from tf_contrib_easgd.runner.launcher import LocalCluster, TaskSpec
from tf_contrib_easgd.trainer.config import EXIT_FAILED, EXIT_USAGE

LAUNCHER_PY = launcher.__file__


# Children sleep in short steps so that none can outlive a broken test by long.
SERVE = "import time\nprint('serving', flush=True)\nfor _ in range(600): time.sleep(0.1)"


SILENT = "import time\nfor _ in range(600): time.sleep(0.1)"


def _python(code):
    return (sys.executable, "-c", textwrap.dedent(code))


class Recorder:
    """Collects what a LocalCluster reports."""

    def __init__(self):
        self.lines, self.starts = [], []

    def on_line(self, task, line):
        self.lines.append((task.name, line))

    def on_start(self, task, pid, restarts):
        self.starts.append((task.name, pid, restarts))


def test_supervise_returns_when_the_workers_succeed_and_stop_ends_the_servers(tmp_path):
    record = Recorder()
    tasks = [
        TaskSpec("ps", 0, _python(SERVE), finishes=False),
        TaskSpec("worker", 0, _python("print('hello from 0')")),
        TaskSpec("worker", 1, _python("import os; print('TF_CONFIG', os.environ['TF_CONFIG'])"),
                 env=(("TF_CONFIG", "{}"),)),
    ]  # fmt: skip
    with LocalCluster(
        tasks, log_dir=str(tmp_path), on_line=record.on_line, on_start=record.on_start
    ) as cluster:
        cluster.start()
        cluster.supervise()
        ps = cluster.children[0]
        assert ps.poll() is None  # A server runs on until it is stopped.
        assert not cluster.wait_for_servers(0.2)
    assert not process_alive(ps.pid)
    assert ("worker 0", "hello from 0") in record.lines
    assert ("worker 1", "TF_CONFIG {}") in record.lines  # The task's own environment.
    assert [name for name, _, _ in record.starts] == ["ps 0", "worker 0", "worker 1"]
    assert (tmp_path / "worker_0.log").read_text() == "hello from 0\n"
    assert "serving" in (tmp_path / "ps_0.log").read_text()


def test_a_failed_task_fails_the_job_with_its_output_and_everything_is_stopped(tmp_path):
    tasks = [
        TaskSpec("ps", 0, _python(SERVE), finishes=False),
        TaskSpec("worker", 0, _python(SILENT)),
        TaskSpec("worker", 1, _python("import sys; print('boom', file=sys.stderr); sys.exit(3)")),
    ]
    with (
        pytest.raises(launcher.TaskFailedError) as caught,
        LocalCluster(tasks, log_dir=str(tmp_path)) as cluster,
    ):
        cluster.start()
        pids = [child.pid for child in cluster.children]
        cluster.supervise()
    error = caught.value
    assert str(error) == "worker 1 exited with code 3"
    assert (error.task.name, error.returncode, error.tail) == ("worker 1", 3, ["boom"])
    assert error.log_path == str(tmp_path / "worker_1.log")
    assert wait_for_exit(pids, 0) == []  # Stopped on the way out of the `with` block.


def test_a_task_killed_by_a_signal_is_reported_as_such():
    with (
        pytest.raises(launcher.TaskFailedError, match="worker 0 was killed by signal SIGKILL"),
        LocalCluster([TaskSpec("worker", 0, _python(SILENT))]) as cluster,
    ):
        cluster.start()
        os.kill(cluster.children[0].pid, signal.SIGKILL)
        cluster.supervise()


def test_a_failed_task_is_restarted_up_to_max_restarts(tmp_path):
    # The child fails on its first run (no marker file yet) and succeeds on its second.
    marker = tmp_path / "ran-once"
    code = f"""
        import os, sys
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            sys.exit(5)
        print("second run")
    """
    record = Recorder()
    task = TaskSpec("worker", 0, _python(code))
    with LocalCluster(
        [task], on_line=record.on_line, on_start=record.on_start, max_restarts=1
    ) as cluster:
        cluster.start()
        cluster.supervise()
        assert cluster.children[0].restarts == 1
    assert [(name, restarts) for name, _, restarts in record.starts] == [
        ("worker 0", 0),
        ("worker 0", 1),
    ]
    assert ("worker 0", "second run") in record.lines


def test_restarts_are_bounded():
    failing = TaskSpec("worker", 0, _python("import sys; sys.exit(4)"))
    with (
        pytest.raises(launcher.TaskFailedError, match="exited with code 4"),
        LocalCluster([failing], max_restarts=2) as cluster,
    ):
        cluster.start()
        cluster.supervise()
    assert cluster.children[0].restarts == 2


def test_a_final_exit_code_fails_the_job_with_restarts_left():
    failing = TaskSpec("worker", 0, _python("import sys; sys.exit(2)"))
    record = Recorder()
    with (
        pytest.raises(launcher.TaskFailedError, match="exited with code 2"),
        LocalCluster(
            [failing], on_start=record.on_start, max_restarts=3, final_codes=(2,)
        ) as cluster,
    ):
        cluster.start()
        cluster.supervise()
    assert cluster.children[0].restarts == 0
    assert [(name, restarts) for name, _, restarts in record.starts] == [("worker 0", 0)]


def test_a_silent_job_fails_after_the_stall_timeout():
    started = time.monotonic()
    with (
        pytest.raises(launcher.StallError, match=r"no task printed anything for \d+ s"),
        LocalCluster([TaskSpec("worker", 0, _python(SILENT))], stall_timeout_secs=0.5) as c,
    ):
        c.start()
        c.supervise()
    assert time.monotonic() - started < 10


def test_stop_kills_a_child_that_ignores_sigterm_and_its_own_children(tmp_path):
    # The child ignores SIGTERM and starts a grandchild; both must be gone after stop().
    pid_file = tmp_path / "grandchild.pid"
    code = f"""
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        grandchild = subprocess.Popen([sys.executable, "-c", {SILENT!r}])
        with open({str(pid_file)!r} + ".partial", "w") as file:
            file.write(str(grandchild.pid))
        os.rename({str(pid_file)!r} + ".partial", {str(pid_file)!r})
        for _ in range(600): time.sleep(0.1)
    """
    cluster = LocalCluster([TaskSpec("ps", 0, _python(code), finishes=False)], stop_grace_secs=0.5)
    with cluster:
        cluster.start()
        deadline = time.monotonic() + 20
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    assert cluster.children[0].returncode == -signal.SIGKILL
    assert wait_for_exit([cluster.children[0].pid, grandchild]) == []


def test_start_only_some_tasks_and_wait_for_a_line():
    record = Recorder()
    tasks = [
        TaskSpec("ps", 0, _python(SERVE), finishes=False),
        TaskSpec("worker", 0, _python("print('worker says hi')")),
    ]
    with LocalCluster(tasks, on_line=record.on_line, on_start=record.on_start) as cluster:
        cluster.start(only=["ps 0"])
        assert cluster.wait_for_line(lambda task, line: line == "serving", timeout_secs=20)
        assert [name for name, _, _ in record.starts] == ["ps 0"]
        cluster.start()  # Starts worker 0; ps 0 runs already.
        assert [name for name, _, _ in record.starts] == ["ps 0", "worker 0"]
        cluster.supervise()
    assert ("worker 0", "worker says hi") in record.lines


def test_wait_for_line_gives_up_at_the_deadline_or_on_a_failure():
    with LocalCluster([TaskSpec("ps", 0, _python(SILENT), finishes=False)]) as cluster:
        cluster.start()
        started = time.monotonic()
        assert not cluster.wait_for_line(lambda task, line: True, timeout_secs=0.3)
        assert time.monotonic() - started < 5
    failing = TaskSpec("worker", 0, _python("import sys; sys.exit(7)"))
    with (
        pytest.raises(launcher.TaskFailedError, match="exited with code 7"),
        LocalCluster([failing]) as cluster,
    ):
        cluster.start()
        cluster.wait_for_line(lambda task, line: False, timeout_secs=30)


# A launcher of its own, in a separate process: launcher.py is loaded by path: it needs
# nothing else of the package.
DRIVER = f"""
import importlib.util, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
# A terminal's Ctrl-C: a command started with & by a non-interactive shell (a CI step, say)
# inherits SIGINT ignored, and Python then leaves it so.
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
launcher = load("launcher", {LAUNCHER_PY!r})
tasks = [launcher.TaskSpec("worker", i, (sys.executable, "-c", {SERVE!r})) for i in range(2)]
try:
    with launcher.sigterm_as_keyboard_interrupt(), launcher.LocalCluster(
        tasks, on_line=lambda task, line: print(task.name, line, flush=True),
        on_start=lambda task, pid, restarts: print("pid", pid, flush=True),
    ) as cluster:
        cluster.start()
        cluster.supervise()
except KeyboardInterrupt as error:
    print("interrupted", str(error) or "Ctrl-C", flush=True)
    sys.exit(130)
"""


@contextlib.contextmanager
def _driver():
    """Runs DRIVER as the child of a LocalCluster of the test's own, until both of the
    driver's children serve; yields that cluster, the driver's Child and the pids of the
    driver's children."""
    lines = []
    with LocalCluster(
        [TaskSpec("driver", 0, (sys.executable, "-c", DRIVER))],
        on_line=lambda task, line: lines.append(line),
        stall_timeout_secs=60,
    ) as cluster:
        cluster.start()
        serving = lambda task, line: sum(x.endswith(" serving") for x in lines) == 2  # noqa: E731
        assert cluster.wait_for_line(serving, timeout_secs=60), lines
        pids = [int(line.split()[1]) for line in lines if line.startswith("pid ")]
        yield cluster, cluster.children[0], pids


@pytest.mark.parametrize(
    ("signum", "reason"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")]
)
def test_ctrl_c_or_sigterm_to_the_launcher_stops_every_child(signum, reason):
    with _driver() as (cluster, driver, pids):
        os.kill(driver.pid, signum)
        with pytest.raises(launcher.TaskFailedError) as caught:
            cluster.supervise()
    assert caught.value.returncode == 130, list(caught.value.tail)
    assert f"interrupted {reason}" in caught.value.tail
    assert wait_for_exit(pids) == []


def test_children_die_with_a_killed_launcher():
    # SIGKILL gives the launcher no chance to clean up: the parent-death signal does it.
    with _driver() as (cluster, driver, pids):
        os.kill(driver.pid, signal.SIGKILL)
        with pytest.raises(launcher.TaskFailedError, match="killed by signal SIGKILL"):
            cluster.supervise()
    assert wait_for_exit(pids) == []


def test_a_dropped_task_no_longer_fails_the_job():
    tasks = [
        TaskSpec("worker", 0, _python("import time; time.sleep(1); print('done')")),
        TaskSpec("worker", 1, _python("raise SystemExit(3)")),
    ]
    with LocalCluster(tasks) as cluster:
        cluster.start()
        lost = cluster.children[1]
        assert lost.wait(30) == 3
        cluster.drop("worker 1")
        cluster.supervise()  # Worker 0 alone decides; worker 1's exit code 3 is not raised.
        assert [child.task.name for child in cluster.children] == ["worker 0"]
        assert cluster.children[0].poll() == 0


def test_drop_rejects_a_running_or_unknown_task():
    with LocalCluster([TaskSpec("ps", 0, _python(SILENT), finishes=False)]) as cluster:
        cluster.start()
        with pytest.raises(ValueError, match=r"task 'ps 0' is still running"):
            cluster.drop("ps 0")
        with pytest.raises(ValueError, match=r"name must be the name of a task, got 'ps 9'"):
            cluster.drop("ps 9")


def _local_job_of_a_failing_chief(model_dir, chief, max_restarts):
    """Runs a ps that serves and the chief `chief` (Python code) as local mode does.

    Returns:
        The job's exit code and what local mode printed.
    """
    tasks = [
        TaskSpec("ps", 0, _python(SERVE), finishes=False),
        TaskSpec("worker", 0, _python(chief)),
    ]
    plan = types.SimpleNamespace(
        config=types.SimpleNamespace(model_dir=str(model_dir), timeout_secs=60),
        max_restarts=max_restarts,
    )
    stream = io.StringIO()
    display = Display(1, 10, stream, bar=False)
    return local._supervise(plan, tasks, display, stream), stream.getvalue()


@pytest.mark.parametrize(
    ("code", "job_code"), [(EXIT_USAGE, EXIT_USAGE), (EXIT_FAILED, EXIT_FAILED), (3, EXIT_FAILED)]
)
def test_local_mode_exits_2_when_a_task_does_and_1_on_any_other_failure(tmp_path, code, job_code):
    # The chief exits with `code` (2: e.g. it found no checkpoint in --model_dir that
    # restores); a ps serves until it is stopped. The job's code: 2 for 2, else 1.
    chief = (
        f"import sys; print('easgd-train: worker 0: error: bad', file=sys.stderr); sys.exit({code})"
    )
    exit_code, printed = _local_job_of_a_failing_chief(tmp_path, chief, max_restarts=0)
    assert exit_code == job_code
    assert printed.endswith(
        f"easgd-train: error: worker 0 exited with code {code}; every other task was stopped. "
        f"Its last lines:\n  | easgd-train: worker 0: error: bad\n"
        f"Whole output: {tmp_path}/logs/worker_0.log\n"
    )


@pytest.mark.parametrize(("code", "starts"), [(EXIT_USAGE, 1), (EXIT_FAILED, 3)])
def test_local_mode_restarts_a_failed_task_but_not_one_that_found_bad_input(tmp_path, code, starts):
    # --max_restarts=2: a chief exiting 1 runs 1 + 2 times; one exiting 2 (bad input that
    # its restart would find again) once.
    chief = f"import sys; sys.exit({code})"
    exit_code, printed = _local_job_of_a_failing_chief(tmp_path, chief, max_restarts=2)
    assert exit_code == code
    assert printed.count("easgd-train: started worker 0, pid") == starts


def test_lines_hidden_from_the_tail_stay_in_the_log(tmp_path):
    code = "import sys\nprint('noise 1')\nprint('real 1')\nprint('noise 2')\nsys.exit(3)"
    with (
        pytest.raises(launcher.TaskFailedError) as raised,
        LocalCluster(
            [TaskSpec("worker", 0, _python(code))],
            log_dir=tmp_path,
            hide_from_tail=lambda line: line.startswith("noise"),
        ) as cluster,
    ):
        cluster.start()
        cluster.supervise()
    assert raised.value.tail == ["real 1"]
    assert (tmp_path / "worker_0.log").read_text() == "noise 1\nreal 1\nnoise 2\n"
