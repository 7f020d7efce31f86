"""Tests of local mode's private network namespace (tf_contrib_easgd.runner.isolation).

The decision (re-execute under `unshare`, say why not, or `--expose_ports`) is tested in
this process with the probe and `os.execve` replaced (the `unshare` probes themselves:
tests/subprocess/test_isolation_subprocess.py). tests/e2e/test_isolation_e2e.py runs
`easgd-train` in local mode (1 ps + 1 worker) until the worker trains and looks at
the tasks from the test's own network namespace: isolated, exposed, and where `unshare` is
refused. It reads the kernel's tables (`/proc/<pid>/ns/net`, `/proc/<pid>/net/tcp*`), so
needs Linux; the isolated case skips where no namespace can be made.
"""

import os
import sys

import pytest
from absl.testing import flagsaver

from tf_contrib_easgd.runner import isolation
from tf_contrib_easgd.trainer import cli
from tf_contrib_easgd.trainer.config import EXIT_USAGE, plan_from_flags


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
