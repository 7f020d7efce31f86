"""The scale harness's cluster: up to 4 ps processes and 64 workers in a few host processes.

Each process is a host of a private network (`HostNetwork`): its own namespace and link
to a switch. The parameter servers' links can be rate-limited between measurements
(`set_rate`); the worker hosts' links are not (each holds several workers, whose own
links a real cluster would not share). During measurements every thread is pinned
(`pin`): the parameter servers' to `PS_CPUS`, the worker hosts' to `WORKER_CPUS`. Without
namespaces the tasks talk over loopback, unshaped. Every process started is killed on close.
"""

import contextlib
import json
import os
import pathlib
import sys

from benchmarks.cluster import (
    START_TIMEOUT_SECS,
    StopsOnExit,
    _free_ports,
    _Process,
    process_cpu_secs,
)
from tf_contrib_easgd.trainer import network

PS_PORT = 2222
WORKER_PORT = 2300  # Worker k of a host listens on WORKER_PORT + k.
#: Where the processes run, on a 2-core machine: the ps tasks on one core, the workers on
#: the other; None: wherever the kernel puts them.
PS_CPUS, WORKER_CPUS = ("0", "1") if os.cpu_count() == 2 else (None, None)


def process_rss_bytes(pid):
    """Resident set size of process `pid`, from /proc/PID/status."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_busy_secs():
    """Busy seconds of each CPU of the machine so far, whoever used it (/proc/stat)."""
    busy = []
    for line in pathlib.Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name != "cpu":
            # user nice system idle iowait irq softirq steal: all but idle and iowait.
            busy.append(sum(int(t) for i, t in enumerate(ticks[:8]) if i not in (3, 4)))
    return [t / os.sysconf("SC_CLK_TCK") for t in busy]


def process_fds(pid):
    """`{"all": open file descriptors, "sockets": those that are sockets}` of process `pid`."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # Closed meanwhile.
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return {"all": len(targets), "sockets": sum(t.startswith("socket:") for t in targets)}


class ScaleCluster(StopsOnExit):
    """`max_ps` parameter server tasks and `num_workers` worker tasks in `num_hosts` hosts.

    Worker w runs on host w % num_hosts, so the first W workers of any W are spread evenly.
    Parameter servers start on demand (`start_ps`), fresh each time.
    """

    def __init__(self, max_ps, num_workers, num_hosts, log_dir, netns=True, malloc=True):
        self.max_ps, self.num_workers, self.num_hosts = max_ps, num_workers, num_hosts
        self.log_dir = pathlib.Path(log_dir)
        self.malloc = malloc
        self.ps = {}  # ps index -> _Process
        self.hosts = []
        self.network = None
        ps_names = [f"ps{i}" for i in range(max_ps)]
        host_names = [f"wk{h}" for h in range(num_hosts)]
        if netns:
            bytes_of = {name: i for i, name in enumerate(ps_names + host_names, start=1)}
            self.network = network.HostNetwork(bytes_of, name="easgd-scale")
            ip = self.network.address
            self.prefix = self.network.exec_prefix
        else:
            ip, self.prefix = (lambda _: "localhost"), (lambda _: [])
        ports = _free_ports(max_ps + num_workers) if not netns else None
        ps_addresses = [
            f"{ip(name)}:{ports[i] if ports else PS_PORT}" for i, name in enumerate(ps_names)
        ]
        worker_addresses = [
            f"{ip(host_names[w % num_hosts])}:"
            f"{ports[max_ps + w] if ports else WORKER_PORT + w // num_hosts}"
            for w in range(num_workers)
        ]
        self.spec = {"ps": ps_addresses, "worker": worker_addresses}

    def _start(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for host in range(self.num_hosts):
            workers = ",".join(str(w) for w in self.host_workers(host, self.num_workers))
            self.hosts.append(
                self._start_task(f"wk{host}", "--role=workers", f"--workers={workers}")
            )
        for process in self.hosts:
            process.receive(START_TIMEOUT_SECS)

    def host_workers(self, host, workers):
        """The task indices among the first `workers` that live on `host`."""
        return list(range(host, workers, self.num_hosts))

    def _start_task(self, name, *arguments):
        argv = [*self.prefix(name), sys.executable, "-m", "benchmarks.scale_task",
                f"--cluster={json.dumps(self.spec)}", *arguments]  # fmt: skip
        if not self.malloc:
            argv.append("--noreuse_freed_memory")
        # Each host's workers share its process's inter-op pool; a blocked exchange holds a
        # thread, so the pool has two per worker (tests/conftest.py has the deadlock).
        threads = 2 * len(self.host_workers(0, self.num_workers)) + 4
        environ = {"TF_NUM_INTEROP_THREADS": str(threads)}
        return _Process(name, argv, self.log_dir / f"{name}.log", environ)

    def start_ps(self):
        """(Re)starts every ps task as a fresh process (a reset needs every task up, even
        those a measurement does not use)."""
        self.stop_ps()
        for index in range(self.max_ps):
            self.ps[index] = self._start_task(f"ps{index}", "--role=ps", f"--index={index}")
        for process in self.ps.values():
            process.receive(START_TIMEOUT_SECS)

    def ps_memory(self, count):
        """`{"rss", "rss_used"}` of each of the first `count` ps tasks (`ParameterServer`)."""
        for index in range(count):
            self.ps[index].send({"cmd": "memory"})
        return [self.ps[index].receive(60) for index in range(count)]

    def stop_ps(self):
        for process in self.ps.values():
            process.stop()
        self.ps = {}

    def pin(self, pinned=True):
        """Pins every thread of the ps tasks to PS_CPUS and of the hosts to WORKER_CPUS, or
        unpins them (builds and start-ups use every core). Threads started later inherit
        their creator's CPUs."""
        every = set(range(os.cpu_count()))
        for pids, cpus in ((self.ps_pids(), PS_CPUS), (self.host_pids(), WORKER_CPUS)):
            mask = {int(cpu) for cpu in cpus.split(",")} if pinned and cpus else every
            for pid in pids:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError):  # A thread that has just ended.
                        os.sched_setaffinity(int(tid), mask)

    def call(self, host, command, timeout_secs, **arguments):
        """Sends `command` to host `host` and returns its answer."""
        self.hosts[host].send({"cmd": command, **arguments})
        return self.hosts[host].receive(timeout_secs)

    def call_hosts(self, commands, timeout_secs, meanwhile=None):
        """Sends `{host: (command, arguments)}` at once, runs `meanwhile()` if given, and
        returns `({host: answer}, what meanwhile returned)`."""
        for host, (command, arguments) in commands.items():
            self.hosts[host].send({"cmd": command, **arguments})
        during = meanwhile() if meanwhile else None
        return {host: self.hosts[host].receive(timeout_secs) for host in commands}, during

    def counters(self):
        """CPU seconds of the ps tasks, of the worker hosts and of each CPU (everyone's),
        and the bytes (sent plus received) of each ps task's link (None without
        namespaces)."""
        ps = [process.process.pid for process in self.ps.values()]
        return {
            "cpus": cpu_busy_secs(),
            "ps_cpu": [process_cpu_secs(pid) for pid in ps],
            "hosts_cpu": sum(process_cpu_secs(h.process.pid) for h in self.hosts),
            "ps_link": [sum(self.network.link_bytes(f"ps{i}")) for i in self.ps]
            if self.network
            else None,
        }

    def ps_pids(self):
        return [process.process.pid for process in self.ps.values()]

    def host_pids(self):
        return [process.process.pid for process in self.hosts]

    def set_ps_rate(self, rate):
        """Limits every ps task's link to `rate` ("1gbit"), or lifts the limit (None)."""
        for index in range(self.max_ps):
            self.network.set_rate(f"ps{index}", rate)

    def close(self):
        self.stop_ps()
        for process in self.hosts:
            process.stop()
        self.hosts = []
        if self.network is not None:
            self.network.delete()
