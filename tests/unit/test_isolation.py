"""Tests of local mode's private network namespace (tf_contrib_easgd.trainer.isolation).

The decision (re-execute under `unshare`, say why not, or `--expose_ports`) is tested in
this process with the probe and `os.execve` replaced. The tests marked e2e run
`easgd-train` in local mode (1 ps + 1 worker) until the worker trains and look at the
tasks from the test's own network namespace: isolated, exposed, and where `unshare` is
refused. They read the kernel's tables (`/proc/<pid>/ns/net`, `/proc/<pid>/net/tcp*`), so
need Linux; the isolated case skips where no namespace can be made.
"""

import contextlib
import os
import re
import socket
import stat
import subprocess
import sys

import pytest
from absl.testing import flagsaver
from processes import child_env, wait_for_exit

from tf_contrib_easgd.trainer import cli, isolation, launcher
from tf_contrib_easgd.trainer.config import EXIT_USAGE, plan_from_flags

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, two at once in ~20 s.
PROCESS_TIMEOUT_SECS = 240
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")
REFUSING_UNSHARE = (
    "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
)


class ReexecutedError(Exception):
    """Raised by the stand-in of `os.execve`."""


@pytest.fixture
def no_marker(monkeypatch):
    """The environment of a launcher that was not re-executed (and is restored after)."""
    monkeypatch.delenv(isolation.OUTER_NAMESPACE_VARIABLE, raising=False)


@pytest.fixture
def execve(monkeypatch):
    """Replaces `os.execve` by a recorder that raises `ReexecutedError`; yields the calls."""
    calls = []

    def record(path, argv, env):
        calls.append((path, argv, env))
        raise ReexecutedError

    monkeypatch.setattr(isolation.os, "execve", record)
    return calls


def _refusing_unshare(folder):
    """Writes an `unshare` into `folder` that fails as where namespaces are not allowed."""
    path = folder / "unshare"
    path.write_text(REFUSING_UNSHARE)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return folder


# --- The decision, in this process ---------------------------------------------------------


def test_a_launcher_reexecutes_itself_under_the_unshare_command(monkeypatch, no_marker, execve):
    del no_marker
    monkeypatch.setattr(isolation, "unshare_command", lambda: (["/bin/unshare", "--net"], None))
    command = [sys.executable, "-m", "tf_contrib_easgd.trainer", "--steps=5"]
    with pytest.raises(ReexecutedError):
        isolation.isolate_local_job(command, expose_ports=False)
    [(path, argv, env)] = execve
    assert path == "/bin/unshare"
    assert argv == ["/bin/unshare", "--net", "--", *command]
    # The new launcher learns which namespace it left; this one's environment is unchanged.
    assert env[isolation.OUTER_NAMESPACE_VARIABLE] == isolation.network_namespace()
    assert isolation.OUTER_NAMESPACE_VARIABLE not in os.environ


def test_without_a_namespace_the_job_goes_on_and_says_why_in_one_line(
    monkeypatch, no_marker, execve
):
    del no_marker
    reason = "`unshare --user --map-root-user --net` failed: Operation not permitted"
    monkeypatch.setattr(isolation, "unshare_command", lambda: (None, reason))
    network = isolation.isolate_local_job(["easgd-train"], expose_ports=False)
    assert execve == []
    assert not network.private
    assert network.message == (
        f"easgd-train: note: no private network namespace ({reason}): the tasks' ports are "
        "open on every interface of this machine"
    )


def test_expose_ports_stays_in_the_machines_namespace_without_a_probe(
    monkeypatch, no_marker, execve
):
    del no_marker
    monkeypatch.setattr(isolation, "unshare_command", lambda: pytest.fail("probed"))
    network = isolation.isolate_local_job(["easgd-train"], expose_ports=True)
    assert execve == [] and network == isolation.EXPOSED
    assert "--expose_ports" in network.message and "\n" not in network.message


def test_a_launcher_still_in_the_namespace_it_left_does_not_loop(monkeypatch, execve):
    monkeypatch.setenv(isolation.OUTER_NAMESPACE_VARIABLE, isolation.network_namespace() or "")
    network = isolation.isolate_local_job(["easgd-train"], expose_ports=False)
    assert execve == [] and not network.private
    assert "same network namespace" in network.message
    # Removed, so that the tasks do not inherit it.
    assert isolation.OUTER_NAMESPACE_VARIABLE not in os.environ


def test_no_unshare_command_is_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # An empty folder.
    assert isolation.unshare_command() == (None, "no `unshare` command (util-linux) on PATH")


@LINUX
@pytest.mark.subprocess
def test_a_refused_unshare_is_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(_refusing_unshare(tmp_path)))
    prefix, reason = isolation.unshare_command()
    assert prefix is None
    assert reason.startswith("`unshare ") and reason.endswith(
        "failed: unshare: unshare failed: Operation not permitted"
    )


@LINUX
@pytest.mark.subprocess
def test_a_refusal_names_the_sysctl_that_switches_user_namespaces_off(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(_refusing_unshare(tmp_path)))
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "unprivileged_userns_clone").write_text("0\n")
    monkeypatch.setattr(isolation, "_PROC_SYS", str(tmp_path / "sys"))
    _, reason = isolation.unshare_command()
    assert reason.startswith(
        "unprivileged user namespaces are disabled, kernel.unprivileged_userns_clone = 0; "
        "`unshare --user --map-root-user --net` failed: "
    )


@LINUX
@pytest.mark.subprocess
def test_the_found_prefix_gives_a_private_namespace_with_its_loopback_up():
    prefix, reason = isolation.unshare_command()
    if prefix is None:
        pytest.skip(reason)
    code = (
        "import socket\n"
        "from tf_contrib_easgd.trainer import isolation\n"
        "isolation.bring_up_loopback()\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(server.getsockname(), 10).close()\n"
        "print(isolation.network_namespace())\n"
    )
    done = subprocess.run(
        [*prefix, "--", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.strip() not in ("", isolation.network_namespace())


def test_task_mode_rejects_expose_ports(capsys):
    was_parsed = cli.FLAGS.is_parsed()
    with flagsaver.flagsaver():
        cli.FLAGS.unparse_flags()
        argv = cli.FLAGS(
            ["easgd-train", "--job_name=ps", "--ps_hosts=localhost:2222",
             "--worker_hosts=localhost:2223", "--expose_ports"]
        )  # fmt: skip
        assert plan_from_flags(cli.FLAGS, environ={}).task is not None
        assert cli._main(argv) == EXIT_USAGE
    cli.FLAGS.unparse_flags()
    if was_parsed:
        cli.FLAGS.mark_as_parsed()
    assert "easgd-train: error: --expose_ports applies to --cluster=local only" in (
        capsys.readouterr().err
    )


# --- easgd-train in local mode, as a separate process --------------------------------------


def _console_script():
    path = os.path.join(os.path.dirname(sys.executable), "easgd-train")
    assert os.path.exists(path), "install the package: pip install -e '.[test]'"
    return path


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
@pytest.mark.e2e
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
@pytest.mark.e2e
def test_expose_ports_runs_the_tasks_in_the_machines_namespace(tmp_path):
    with _training_job(tmp_path, "--expose_ports") as (lines, launcher_pid, pids):
        ours = _namespace("self")
        assert {_namespace(pid) for pid in [launcher_pid, *pids]} == {ours}
        ports = _task_ports(pids[0])
        assert set(ports) <= _listening_ports()
        assert all(_reachable(port) for port in ports)
        assert _messages(lines) == [isolation.EXPOSED.message]


@LINUX
@pytest.mark.e2e
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
