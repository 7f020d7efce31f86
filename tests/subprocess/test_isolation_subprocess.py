"""Tests with a child process (a console script, a fresh interpreter): local mode's private
network namespace (runner/isolation.py).

The tests of its other tiers are in tests/unit/test_isolation.py.
"""

import subprocess
import sys

import pytest
from namespaces import LINUX
from namespaces import refusing_unshare as _refusing_unshare

from tf_contrib_easgd.runner import isolation


@LINUX
def test_a_refused_unshare_is_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(_refusing_unshare(tmp_path)))
    prefix, reason = isolation.unshare_command()
    assert prefix is None
    assert reason.startswith("`unshare ") and reason.endswith(
        "failed: unshare: unshare failed: Operation not permitted"
    )


@LINUX
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
def test_the_found_prefix_gives_a_private_namespace_with_its_loopback_up():
    prefix, reason = isolation.unshare_command()
    if prefix is None:
        pytest.skip(reason)
    code = (
        "import socket\n"
        "from tf_contrib_easgd.runner import isolation\n"
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
