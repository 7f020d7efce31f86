"""End-to-end tests (ps and worker OS processes): local mode's private network namespace
(runner/isolation.py).

The tests of its other tiers are in tests/unit/test_isolation.py.
"""

import contextlib
import os
import re
import socket

import pytest
from namespaces import LINUX
from namespaces import refusing_unshare as _refusing_unshare
from processes import child_env, wait_for_exit
from processes import easgd_train_script as _console_script

from tf_contrib_easgd.runner import isolation, launcher

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, two at once in ~20 s.
PROCESS_TIMEOUT_SECS = 240


def _namespace(pid):
    return os.readlink(f"/proc/{pid}/ns/net")


def _task_ports(pid):
    """The ports of every task of the job, from the command line of the task `pid`."""
    with open(f"/proc/{pid}/cmdline", encoding="utf-8") as file:
        argv = file.read().split("\0")
    hosts = [
        arg.split("=", 1)[1] for arg in argv if arg.startswith(("--ps_hosts=", "--worker_hosts="))
    ]
    return sorted(int(host.rsplit(":", 1)[1]) for arg in hosts for host in arg.split(","))


def _listening_ports(pid="self"):
    """The TCP ports with a listening socket in the network namespace of process `pid`."""
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/net/{table}") as file:
            for row in file.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                if state == "0A":  # TCP_LISTEN
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def _reachable(port):
    """Whether a connection to 127.0.0.1:`port` from the test's namespace is accepted."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _training_job(tmp_path, *flags, env=None):
    """Runs easgd-train (1 ps + 1 worker) until its worker trains; stops it after the block.

    Yields:
        `(lines, launcher_pid, task_pids)`: its output so far, its pid and its tasks'.
    """
    command = (
        _console_script(), "--workers=1", "--steps=1000000", "--log_every_steps=50",
        "--eval_every_steps=0", f"--model_dir={tmp_path}", "--timeout_secs=120", *flags,
    )  # fmt: skip
    lines = []
    with launcher.LocalCluster(
        [launcher.TaskSpec("easgd-train", 0, command)],
        env=env or child_env(),
        on_line=lambda task, line: lines.append(line),
    ) as job:
        job.start()
        training = job.wait_for_line(
            lambda task, line: line.startswith("worker 0: step "), PROCESS_TIMEOUT_SECS
        )
        assert training, "\n".join(lines)
        pids = [int(p) for p in re.findall(r"started \w+ \d+, pid (\d+)", "\n".join(lines))]
        assert len(pids) == 2, "\n".join(lines)
        yield lines, job.children[0].pid, pids
    assert wait_for_exit(pids) == []


def _messages(lines):
    """The launcher's lines about the network namespace."""
    return [line for line in lines if "network namespace" in line or "--expose_ports" in line]


@LINUX
@pytest.mark.netns
def test_the_local_job_runs_in_a_private_namespace(tmp_path):
    prefix, reason = isolation.unshare_command()
    if prefix is None:
        pytest.skip(reason)
    with _training_job(tmp_path) as (lines, launcher_pid, pids):
        ours, theirs = _namespace("self"), _namespace(launcher_pid)
        # The launcher (re-executed in place: the same pid) and every task share one
        # namespace, not the test's.
        assert theirs != ours
        assert {_namespace(pid) for pid in pids} == {theirs}
        ports = _task_ports(pids[0])
        assert len(ports) == 2
        assert set(ports) <= _listening_ports(pids[0])  # Listening in their namespace,
        assert not set(ports) & _listening_ports()  # not in the test's,
        assert not any(_reachable(port) for port in ports)  # so nothing here reaches them.
        assert _messages(lines) == [isolation.PRIVATE.message]
        assert not [line for line in lines if "error" in line.lower()]


@LINUX
def test_expose_ports_runs_the_tasks_in_the_machines_namespace(tmp_path):
    with _training_job(tmp_path, "--expose_ports") as (lines, launcher_pid, pids):
        ours = _namespace("self")
        assert {_namespace(pid) for pid in [launcher_pid, *pids]} == {ours}
        ports = _task_ports(pids[0])
        assert set(ports) <= _listening_ports()
        assert all(_reachable(port) for port in ports)
        assert _messages(lines) == [isolation.EXPOSED.message]


@LINUX
def test_where_unshare_is_refused_the_job_says_so_once_and_trains(tmp_path):
    (tmp_path / "bin").mkdir()
    env = child_env()
    env["PATH"] = f"{_refusing_unshare(tmp_path / 'bin')}{os.pathsep}{env.get('PATH', os.defpath)}"
    with _training_job(tmp_path / "run", env=env) as (lines, launcher_pid, pids):
        assert {_namespace(pid) for pid in [launcher_pid, *pids]} == {_namespace("self")}
        [message] = _messages(lines)
        assert message.startswith("easgd-train: note: no private network namespace (`unshare ")
        assert "Operation not permitted" in message
        assert all(_reachable(port) for port in _task_ports(pids[0]))
