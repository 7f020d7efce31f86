"""Local mode's private network namespace: a job's ports closed to other hosts.

TensorFlow's gRPC servers listen on every interface, without authentication: whoever
reaches a task's port can run any op in that task. In local mode the tasks talk over
loopback only, so before it starts any task the launcher re-executes itself in a network
namespace of its own, whose only interface is a loopback of its own, which it brings up.
Every task it starts inherits that namespace: the tasks reach each other, and nothing
outside the namespace reaches them. The namespace comes from the `unshare` command
(util-linux): `unshare --net` as root; otherwise, or where root may not make one (a
container), `unshare --user --map-root-user --net`, which needs unprivileged user
namespaces. Where neither works, or with `--expose_ports`, the job runs in the machine's
namespace and says so. Linux only; no TensorFlow here. README.md, "Security".
"""

import dataclasses
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys

#: Set for the re-executed launcher: the identity of the namespace it left.
OUTER_NAMESPACE_VARIABLE = "EASGD_TRAIN_OUTER_NETNS"
#: The `unshare` options of a network namespace, as root and as any user.
ROOT_OPTIONS = ("--net",)
USER_OPTIONS = ("--user", "--map-root-user", "--net")
PROBE_TIMEOUT_SECS = 30.0

# <linux/sockios.h>, <net/if.h>: get and set the flags of an interface, `struct ifreq`.
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = struct.Struct("16sH22x")
_PROBE = "from tf_contrib_easgd.runner import isolation; isolation.bring_up_loopback()"
# The sysctls by which distributions switch unprivileged user namespaces off, and the value
# that does.
_PROC_SYS = "/proc/sys"
_USERNS_SWITCHES = (
    ("kernel.unprivileged_userns_clone", "0"),
    ("user.max_user_namespaces", "0"),
    ("kernel.apparmor_restrict_unprivileged_userns", "1"),
)


@dataclasses.dataclass(frozen=True)
class Isolation:
    """Where a local job's tasks run.

    Attributes:
        private: whether they run in a private network namespace.
        message: the line that says so when the job starts.
    """

    private: bool
    message: str


PRIVATE = Isolation(
    True,
    "easgd-train: the tasks run in a private network namespace: their ports are closed to "
    "other hosts (--expose_ports opens them)",
)
EXPOSED = Isolation(
    False,
    "easgd-train: --expose_ports: the tasks' ports are open on every interface of this "
    "machine, without authentication",
)


def unavailable(reason):
    """The `Isolation` of a job that has no private namespace, for `reason`."""
    return Isolation(
        False,
        f"easgd-train: note: no private network namespace ({reason}): the tasks' ports are "
        "open on every interface of this machine",
    )


def network_namespace():
    """This process's network namespace, e.g. `"net:[4026531840]"`; None if unknown."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None


def bring_up_loopback():
    """Brings up the interface `lo` of this process's network namespace, as `ip link set lo
    up` does (an ioctl; needs CAP_NET_ADMIN there).

    Raises:
        OSError: if it cannot.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = _IFREQ.pack(b"lo", 0)
        flags = _IFREQ.unpack(fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        if not flags & _IFF_UP:
            fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, _IFREQ.pack(b"lo", flags | _IFF_UP))


def unshare_command():
    """The command prefix that runs a command in a new network namespace, or why there is none.

    Each candidate (as root `unshare --net` first, then `unshare --user --map-root-user
    --net`) is tried on a short Python process that brings up the namespace's loopback.

    Returns:
        `(prefix, None)`, e.g. `(["/usr/bin/unshare", "--net"], None)`, or `(None, reason)`.
    """
    if not sys.platform.startswith("linux"):
        return None, "network namespaces need Linux"
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "no `unshare` command (util-linux) on PATH"
    reason = None
    for options in (ROOT_OPTIONS, USER_OPTIONS) if os.geteuid() == 0 else (USER_OPTIONS,):
        prefix = [unshare, *options]
        reason = _probe(prefix)
        if reason is None:
            return prefix, None
    return None, reason


def _probe(prefix):
    """None if `prefix` runs a process in a new network namespace with its loopback up, else
    why not."""
    shown = " ".join(["unshare", *prefix[1:]])
    try:
        done = subprocess.run(
            [*prefix, "--", sys.executable, "-c", _PROBE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_SECS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`{shown}` failed: {error}"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    reason = f"`{shown}` failed: {lines[-1] if lines else f'exit code {done.returncode}'}"
    if prefix[1:] == list(USER_OPTIONS):
        switch = _userns_switch()
        if switch:
            reason = f"unprivileged user namespaces are disabled, {switch}; {reason}"
    return reason


def _userns_switch():
    """The setting that switches unprivileged user namespaces off here, e.g.
    `"kernel.unprivileged_userns_clone = 0"`, or None."""
    for name, off in _USERNS_SWITCHES:
        try:
            with open(os.path.join(_PROC_SYS, *name.split(".")), encoding="ascii") as file:
                value = file.read().strip()
        except OSError:
            continue
        if value == off:
            return f"{name} = {value}"
    return None


def isolate_local_job(command, expose_ports):
    """Puts this launcher, before it starts any task, in a private network namespace.

    Called twice per job. The first time, it re-executes `command` (this program, with the
    same arguments) under `unshare` and so never returns, unless `expose_ports` or no
    namespace can be made here. The second time, in the new namespace (it finds
    `OUTER_NAMESPACE_VARIABLE`, which it removes so that the tasks do not inherit it), it
    brings up the loopback and returns.

    Args:
        command: the command line that runs this program again, an executable path first.
        expose_ports: if true, stay in the machine's network namespace.

    Returns:
        The `Isolation` of the job's tasks.

    Raises:
        OSError: if the loopback of the new namespace cannot be brought up.
    """
    outer = os.environ.pop(OUTER_NAMESPACE_VARIABLE, None)
    if outer is not None:
        if network_namespace() in (None, outer):
            return unavailable("re-executed under `unshare`, but in the same network namespace")
        bring_up_loopback()
        return PRIVATE
    if expose_ports:
        return EXPOSED
    prefix, reason = unshare_command()
    if prefix is None:
        return unavailable(reason)
    env = dict(os.environ, **{OUTER_NAMESPACE_VARIABLE: network_namespace() or ""})
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(prefix[0], [*prefix, "--", *command], env)  # Returns only by raising.
    except OSError as error:
        return unavailable(f"cannot run {prefix[0]}: {error}")
