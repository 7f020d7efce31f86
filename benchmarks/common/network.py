"""Private networks of Linux network namespaces: hosts on a switch, optionally rate-limited.

`HostNetwork` makes one namespace per host, each with one interface (`eth0`, one end of a
veth pair) and a private IPv4 address, and a bridge in a "switch" namespace of its own
joining the other ends. Nothing of the machine's own network is touched, so a network
made here can be deleted without trace. A rate limits each host's link in both
directions, as a network card of that speed would (`tc` token bucket filters). Needs
Linux, root and iproute2; `unavailable_reason()` says why not. The tests and benchmarks
that need several hosts on one machine use it; TensorFlow is not needed here.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import uuid

IP_TIMEOUT_SECS = 30
SUBNET = "10.213.0"  # Every network is private (its own switch), so all can use it.
_RATE = re.compile(r"^[1-9][0-9]*(\.[0-9]+)?(bit|kbit|mbit|gbit)$")
_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def run_ip(*arguments, check=True):
    """Runs `ip ARGUMENTS`; returns the completed process.

    Raises:
        RuntimeError: if `check` and the command failed (its error output is in the message).
    """
    return _run(["ip", *arguments], check)


def _run(argv, check):
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=IP_TIMEOUT_SECS, check=False
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result


def unavailable_reason(rate=None):
    """Why a `HostNetwork` cannot be made here (a probe makes and deletes one), or None.

    Args:
        rate: the link rate that will be asked for, if any: `tc` must then be there too.
    """
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if rate is not None and shutil.which("tc") is None:
        return "the `tc` command (iproute2) is not installed"
    probe = f"easgd-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    made = run_ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    run_ip("netns", "del", probe, check=False)
    return None


def rate_bits_per_sec(rate):
    """The bits per second of a `tc` rate such as "1gbit" or "100mbit".

    Raises:
        ValueError: if `rate` is not a positive number followed by bit, kbit, mbit or gbit.
    """
    match = _RATE.match(rate) if isinstance(rate, str) else None
    if match is None:
        raise ValueError(
            f"rate must look like '1gbit', '100mbit', '500kbit' or '64000bit', got {rate!r}"
        )
    return float(rate[: match.start(2)]) * _RATE_UNITS[match.group(2)]


def cpu_mask(cpus):
    """The hexadecimal CPU mask of `cpus`, as `/sys` files such as `rps_cpus` take it: 32
    CPUs a group of 8 digits, groups joined by commas ("1,00000000" is CPU 32).

    Args:
        cpus: CPU ids, a non-empty list of ints each below `os.cpu_count()`.

    Raises:
        ValueError: if `cpus` is empty or names a CPU this machine does not have.
    """
    ids = list(cpus) if isinstance(cpus, list | tuple | set | range) else None
    count = os.cpu_count() or 1
    valid = ids and all(type(cpu) is int and 0 <= cpu < count for cpu in ids)
    if not valid:
        raise ValueError(f"cpus must be a list of CPU ids in 0..{count - 1}, got {cpus!r}")
    digits = f"{sum(1 << cpu for cpu in set(ids)):x}"
    head = len(digits) % 8 or 8  # The kernel reads 32 CPUs (8 digits) a comma-joined group.
    return ",".join([digits[:head], *(digits[i : i + 8] for i in range(head, len(digits), 8))])


class HostNetwork:
    """Hosts (network namespaces) wired to a bridge in a switch namespace of their own.

    Use as a context manager, or call `delete()`: either deletes every namespace made.

    Attributes:
        prefix: start of the names of this network's namespaces (unique).
        switch: the namespace of the bridge; its ports are named after the hosts.
        hosts: `{host name: last byte of its address}`.
        rate: the `tc` rate every host's link was made with, or None for no limit
            (`set_rate` changes one host's).
    """

    def __init__(self, hosts, rate=None, name="easgd-net"):
        """Makes the namespaces, the bridge and one veth pair per host; deletes on error.

        Args:
            hosts: `{host name: last byte of its address}`; names of at most 15 bytes, not
                words `ip link` takes as keywords (such as "a" or "type").
            rate: a `tc` rate ("1gbit", "100mbit") limiting each host's link both ways, or
                None.
            name: start of the namespaces' names.

        Raises:
            ValueError: if `rate` is malformed or a host's address byte is not in 1..254.
            RuntimeError: if a namespace, link or queue discipline cannot be made.
        """
        if rate is not None:
            rate_bits_per_sec(rate)
        for host, byte in hosts.items():
            if not isinstance(byte, int) or not 1 <= byte <= 254:
                raise ValueError(f"hosts[{host!r}] must be an address byte in 1..254, got {byte!r}")
        self.prefix = f"{name}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.switch = f"{self.prefix}-switch"
        self.hosts = dict(hosts)
        self.rate = rate
        self.made = []
        try:
            self._make()
        except BaseException:
            self.delete()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.delete()

    def namespace(self, host):
        """The namespace of `host`."""
        return f"{self.prefix}-{host}"

    def address(self, host):
        """The IPv4 address of `host`."""
        return f"{SUBNET}.{self.hosts[host]}"

    def exec_prefix(self, host):
        """The command-line prefix that runs a command on `host`."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def _add_namespace(self, name):
        run_ip("netns", "add", name)
        self.made.append(name)
        run_ip("-n", name, "link", "set", "lo", "up")

    def _make(self):
        self._add_namespace(self.switch)
        run_ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        run_ip("-n", self.switch, "link", "set", "br0", "up")
        for host in self.hosts:
            namespace = self.namespace(host)
            self._add_namespace(namespace)
            # Both ends are made in their namespaces: no name of the root namespace is used.
            run_ip("-n", self.switch, "link", "add", "name", host, "type", "veth",
                   "peer", "name", "eth0", "netns", namespace)  # fmt: skip
            run_ip("-n", self.switch, "link", "set", host, "master", "br0", "up")
            run_ip("-n", namespace, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            run_ip("-n", namespace, "link", "set", "eth0", "up")
            if self.rate is not None:
                # A queue discipline shapes what leaves an interface: the host's eth0 shapes
                # what it sends, its switch port what it receives.
                self._limit(namespace, "eth0")
                self._limit(self.switch, host)

    def _limit(self, namespace, device, rate=None, verb="add"):
        # The bucket holds ~4 ms at the rate (at least 64 KB, a TSO segment): enough for
        # the kernel's timer granularity without letting bursts exceed the rate for long.
        rate = rate or self.rate
        burst = max(64 * 1024, int(rate_bits_per_sec(rate) / 8 * 0.004))
        tbf = ["tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]
        _run(["ip", "netns", "exec", namespace, "tc", "qdisc", verb, "dev", device, "root", *tbf],
             check=True)  # fmt: skip

    def set_rate(self, host, rate):
        """Limits `host`'s link to `rate` both ways from now on, or lifts its limit.

        A network made without a rate can so shape some hosts only (a parameter server's
        link, which every worker shares), and one made with a rate can change it between
        measurements without restarting what runs on it.

        Args:
            host: a host of this network.
            rate: a `tc` rate ("10gbit"), or None for the veth link's own speed.

        Raises:
            ValueError: if `rate` is malformed.
        """
        if rate is not None:
            rate_bits_per_sec(rate)
        for namespace, device in ((self.namespace(host), "eth0"), (self.switch, host)):
            if rate is None:
                _run(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", device,
                      "root"], check=False)  # fmt: skip
            else:
                self._limit(namespace, device, rate, verb="replace")

    def steer_receives(self, cpus):
        """Has the kernel do the receive work of every interface of this network on `cpus`.

        A packet crossing a veth pair is received by the kernel on the core that sent it,
        so a task's core would also run the switch's and its peers' protocol work: what a
        network card and a switch take off a real machine. Receive packet steering
        (`rps_cpus` of each interface's receive queues) moves that work to `cpus`; the
        tasks still copy their own bytes in and out of their sockets. Lasts as long as the
        network.

        Args:
            cpus: the CPU ids, a non-empty list of ints each below `os.cpu_count()`.

        Raises:
            ValueError: if `cpus` is empty or names a CPU this machine does not have.
            RuntimeError: if an interface's `rps_cpus` cannot be written, or the kernel has
                none (built without receive packet steering).
        """
        mask = cpu_mask(cpus)
        # `ip netns exec` mounts the namespace's own /sys: the glob finds its interfaces.
        script = (
            'for q in /sys/class/net/*/queues/rx-*/rps_cpus; do [ -e "$q" ] || '
            "{ echo 'no rps_cpus: this kernel has no receive packet steering' >&2; exit 1; }; "
            f'echo {mask} > "$q" || exit 1; done'
        )
        for namespace in self.made:
            _run(["ip", "netns", "exec", namespace, "sh", "-c", script], check=True)

    def unplug(self, host):
        """Takes the switch port of `host` down: its packets go nowhere, silently."""
        run_ip("-n", self.switch, "link", "set", host, "down")

    def plug(self, host):
        """Brings the switch port of `host` back up."""
        run_ip("-n", self.switch, "link", "set", host, "up")

    def link_bytes(self, host):
        """`(sent, received)` bytes of `host`'s interface so far, frames' headers included."""
        shown = run_ip("-n", self.namespace(host), "-j", "-s", "link", "show", "eth0")
        stats = json.loads(shown.stdout)[0]["stats64"]
        return stats["tx"]["bytes"], stats["rx"]["bytes"]

    def delete(self):
        """Deletes every namespace made; the veth pairs and the bridge go with them.

        Returns:
            The names that could not be deleted.
        """
        left = []
        for name in reversed(self.made):
            if run_ip("netns", "del", name, check=False).returncode != 0:
                left.append(name)
        self.made = left
        return left
