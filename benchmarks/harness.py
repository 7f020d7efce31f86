"""The benchmarks' processes: clusters of task processes driven over pipes, and /proc.

`BenchCluster` runs one process per ps or worker task (`python -m benchmarks.task`, or
another module and interpreter that speak protocol.py), on loopback, in a private network
namespace (`netns`), or each on a host of its own with a rate-limited link (`rate`).
`ScaleCluster` runs up to 64 workers in a few host processes (`benchmarks.scale_task`).
Leaving either kills every process started and deletes the namespaces; every wait has a
deadline.
"""

import contextlib
import json
import os
import pathlib
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

from benchmarks.protocol import REPLY_PREFIX
from tf_contrib_easgd.job import freed_memory
from tf_contrib_easgd.trainer import network
from tf_contrib_easgd.trainer.launcher import make_die_with_parent

ROOT = pathlib.Path(__file__).resolve().parent.parent
START_TIMEOUT_SECS = 120.0  # Importing TensorFlow alone takes ~15 s on a loaded 2-core box.
HOST_PORT = 2222  # The port of a task that has a host of its own.
#: The scale harness on a 2-core machine: the ps tasks on one core, the workers on the other.
PS_CPUS, WORKER_CPUS = ("0", "1") if os.cpu_count() == 2 else (None, None)


class BenchError(RuntimeError):
    """A benchmark process failed, answered with an error, or did not answer in time."""


class Process:
    """One child process and a thread that queues its answer lines."""

    def __init__(self, name, argv, log_path, environ=None):
        self.name = name
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop().
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**env, **(environ or {})},
            preexec_fn=make_die_with_parent(),  # noqa: PLW1509 - only prctl, no locks taken.
        )
        self.pid = self.process.pid
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith(REPLY_PREFIX):
                self.lines.put(json.loads(line[len(REPLY_PREFIX) :]))
        self.lines.put(None)  # End of output: the process exited.

    def send(self, command, **arguments):
        self.process.stdin.write(json.dumps({"cmd": command, **arguments}) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_secs):
        try:
            message = self.lines.get(timeout=timeout_secs)
        except queue.Empty:
            raise BenchError(f"{self.name} gave no answer in {timeout_secs:.0f} s") from None
        if message is None:
            raise BenchError(f"{self.name} exited with code {self.process.wait(5)}")
        if not message.get("ok"):
            raise BenchError(f"{self.name}: {message.get('error')}")
        return message

    def stop(self):
        """Kills the process (ours: started by this object) and reaps it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self.log.close()


def call_all(processes, command, timeout_secs, **arguments):
    """Sends `command` to every process at once; returns their answers in order."""
    for process in processes:
        process.send(command, **arguments)
    return [process.receive(timeout_secs) for process in processes]


class _Cluster:
    """A context manager of processes: entering runs `_start`, leaving (or an error in
    `_start`) kills every process in `processes` and deletes `network`."""

    processes, network, netns = (), None, None

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        for process in self.processes:
            process.stop()
        self.processes = []
        if self.netns:
            network.run_ip("netns", "del", self.netns, check=False)
        if self.network is not None:
            self.network.delete()

    def cpu_seconds(self, task=None):
        """CPU seconds the processes, or the one named `task` ("ps0"), have used so far."""
        return sum(cpu_secs(p.pid) for p in self.processes if task in (None, p.name))


class BenchCluster(_Cluster):
    """`num_ps` ps and `num_workers` worker processes of `module` run by `python`.

    Args:
        world: "tf1" or "tf2", each process's `--world`.
        netns: run them in a private network namespace (root and `ip netns`).
        rate: a `tc` rate ("1gbit"): each task on a host of its own whose link has it.
        reuse_freed_memory: start each with `tf_contrib_easgd.reuse_freed_memory`'s
            allocator settings, as easgd-train's tasks.
        cpus: None, or {"ps": cpu ids, "worker": cpu ids} (`taskset`).
    """

    def __init__(
        self,
        num_ps,
        num_workers,
        world,
        log_dir,
        netns=False,
        python=sys.executable,
        module="benchmarks.task",
        rate=None,
        reuse_freed_memory=True,
        cpus=None,
    ):
        self.num_ps, self.num_workers, self.world = num_ps, num_workers, world
        self.log_dir = pathlib.Path(log_dir)
        self.netns = f"easgd-bench-{uuid.uuid4().hex[:8]}" if netns and rate is None else None
        self.rate, self.python, self.module = rate, str(python), module
        self.environ = freed_memory.environment() if reuse_freed_memory else {}
        self.cpus = cpus or {}
        self.processes, self.workers, self.ready = [], [], {}

    def _start(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        tasks = [f"ps{i}" for i in range(self.num_ps)]
        tasks += [f"worker{i}" for i in range(self.num_workers)]
        prefix = {task: [] for task in tasks}
        if self.rate is not None:
            hosts = {task: byte for byte, task in enumerate(tasks, start=1)}
            self.network = network.HostNetwork(hosts, self.rate, name="easgd-bench")
            prefix = {task: self.network.exec_prefix(task) for task in tasks}
            address = {task: f"{self.network.address(task)}:{HOST_PORT}" for task in tasks}
        else:
            if self.netns:
                network.run_ip("netns", "add", self.netns)
                network.run_ip("-n", self.netns, "link", "set", "lo", "up")
                prefix = {task: ["ip", "netns", "exec", self.netns] for task in tasks}
            ports = dict(zip(tasks, free_ports(len(tasks)), strict=True))
            address = {task: f"localhost:{ports[task]}" for task in tasks}
        spec = {job: [address[t] for t in tasks if t.startswith(job)] for job in ("ps", "worker")}
        for task in tasks:
            job = task.rstrip("0123456789")
            index = int(task[len(job) :])
            pinned = (
                ["taskset", "-c", ",".join(map(str, self.cpus[job]))] if job in self.cpus else []
            )
            argv = [
                *prefix[task],
                *pinned,
                self.python,
                "-m",
                self.module,
                f"--role={job}",
                f"--index={index}",
                f"--cluster={json.dumps(spec)}",
                f"--world={self.world}",
            ]
            process = Process(task, argv, self.log_dir / f"{task}.log", self.environ)
            self.processes.append(process)
            if job == "worker":
                self.workers.append(process)
        for process in self.processes:
            self.ready[process.name] = process.receive(START_TIMEOUT_SECS)

    def call(self, worker, command, timeout_secs, **arguments):
        """Sends `command` to worker `worker` and returns its answer."""
        return call_all([self.workers[worker]], command, timeout_secs, **arguments)[0]

    def call_all(self, workers, command, timeout_secs, **arguments):
        """Sends `command` to several workers at once; returns their answers in order."""
        return call_all([self.workers[w] for w in workers], command, timeout_secs, **arguments)

    def page_faults(self, task):
        (process,) = [p for p in self.processes if p.name == task]
        return process_stat(process.pid)["minor_faults"]

    def link_bytes(self, task):
        """`(sent, received)` bytes of the link of `task` so far; needs a `rate`."""
        return self.network.link_bytes(task)


class ScaleCluster(_Cluster):
    """`max_ps` ps tasks (started on demand, fresh each time: `start_ps`) and `num_workers`
    worker tasks in `num_hosts` host processes; worker w runs on host w % num_hosts. With
    `netns` each process is a host of a private network whose ps links can be limited
    (`set_ps_rate`); else they talk over loopback. `malloc=False` leaves the C allocator
    as it is."""

    def __init__(self, max_ps, num_workers, num_hosts, log_dir, netns=True, malloc=True):
        self.max_ps, self.num_workers, self.num_hosts = max_ps, num_workers, num_hosts
        self.log_dir, self.malloc = pathlib.Path(log_dir), malloc
        self.ps, self.hosts, self.processes = {}, [], []
        names = [f"ps{i}" for i in range(max_ps)] + [f"wk{h}" for h in range(num_hosts)]
        if netns:
            self.network = network.HostNetwork(
                {name: i for i, name in enumerate(names, start=1)}, name="easgd-scale"
            )
            ports = [HOST_PORT] * max_ps + [
                HOST_PORT + 1 + w // num_hosts for w in range(num_workers)
            ]
            ip, self.prefix = self.network.address, self.network.exec_prefix
        else:
            ports = free_ports(max_ps + num_workers)
            ip, self.prefix = (lambda _: "localhost"), (lambda _: [])
        hosts = [f"wk{w % num_hosts}" for w in range(num_workers)]
        addresses = [
            f"{ip(name)}:{port}" for name, port in zip(names[:max_ps] + hosts, ports, strict=True)
        ]
        self.spec = {"ps": addresses[:max_ps], "worker": addresses[max_ps:]}

    def _start(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for host in range(self.num_hosts):
            workers = ",".join(map(str, self.host_workers(host, self.num_workers)))
            self.hosts.append(
                self._start_task(f"wk{host}", "--role=workers", f"--workers={workers}")
            )
        for process in self.hosts:
            process.receive(START_TIMEOUT_SECS)

    def host_workers(self, host, workers):
        """The task indices among the first `workers` that live on `host`."""
        return list(range(host, workers, self.num_hosts))

    def _start_task(self, name, *arguments):
        argv = [
            *self.prefix(name),
            sys.executable,
            "-m",
            "benchmarks.scale_task",
            f"--cluster={json.dumps(self.spec)}",
            *arguments,
        ]
        if not self.malloc:
            argv.append("--noreuse_freed_memory")
        # A blocked exchange holds an inter-op thread: two per worker of a host.
        threads = 2 * len(self.host_workers(0, self.num_workers)) + 4
        process = Process(
            name, argv, self.log_dir / f"{name}.log", {"TF_NUM_INTEROP_THREADS": str(threads)}
        )
        self.processes.append(process)
        return process

    def start_ps(self):
        """(Re)starts every ps task fresh (a reset needs every task up)."""
        self.stop_ps()
        self.ps = {
            i: self._start_task(f"ps{i}", "--role=ps", f"--index={i}") for i in range(self.max_ps)
        }
        for process in self.ps.values():
            process.receive(START_TIMEOUT_SECS)

    def stop_ps(self):
        for process in self.ps.values():
            process.stop()
            self.processes.remove(process)
        self.ps = {}

    def ps_memory(self, count):
        """`{"rss", "rss_used"}` of each of the first `count` ps tasks."""
        return call_all([self.ps[i] for i in range(count)], "memory", 60)

    def pin(self, pinned=True):
        """Pins every thread of the ps tasks to PS_CPUS and of the hosts to WORKER_CPUS, or
        unpins them (builds and start-ups use every core)."""
        every = set(range(os.cpu_count()))
        for processes, cpus in ((self.ps.values(), PS_CPUS), (self.hosts, WORKER_CPUS)):
            mask = {int(cpu) for cpu in cpus.split(",")} if pinned and cpus else every
            for process in processes:
                for tid in os.listdir(f"/proc/{process.pid}/task"):
                    with contextlib.suppress(OSError):  # A thread that has just ended.
                        os.sched_setaffinity(int(tid), mask)

    def call(self, host, command, timeout_secs, **arguments):
        return call_all([self.hosts[host]], command, timeout_secs, **arguments)[0]

    def call_hosts(self, commands, timeout_secs, meanwhile=None):
        """Sends `{host: (command, arguments)}` at once, runs `meanwhile()` if given;
        returns `({host: answer}, what meanwhile returned)`."""
        for host, (command, arguments) in commands.items():
            self.hosts[host].send(command, **arguments)
        during = meanwhile() if meanwhile else None
        return {host: self.hosts[host].receive(timeout_secs) for host in commands}, during

    def counters(self):
        """CPU seconds of the ps tasks, of the hosts and of each CPU (everyone's), and the
        bytes of each ps task's link (None without namespaces)."""
        links = None
        if self.network:
            links = [sum(self.network.link_bytes(f"ps{i}")) for i in self.ps]
        return {
            "cpus": cpu_busy_secs(),
            "ps_cpu": [cpu_secs(p.pid) for p in self.ps.values()],
            "hosts_cpu": sum(cpu_secs(h.pid) for h in self.hosts),
            "ps_link": links,
        }

    def set_ps_rate(self, rate):
        """Limits every ps task's link to `rate` ("1gbit"), or lifts the limit (None)."""
        for index in range(self.max_ps):
            self.network.set_rate(f"ps{index}", rate)


def process_stat(pid):
    """CPU seconds (user + system) and minor page faults of process `pid`."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {"cpu_secs": (int(fields[11]) + int(fields[12])) / ticks, "minor_faults": int(fields[7])}


def cpu_secs(pid):
    return process_stat(pid)["cpu_secs"]


def rss_bytes(pid):
    """Resident set size of process `pid`."""
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_busy_secs():
    """Busy seconds of each CPU so far, whoever used it (all but idle and iowait)."""
    busy = []
    for line in pathlib.Path("/proc/stat").read_text().splitlines():
        name, *ticks = line.split()
        if name.startswith("cpu") and name != "cpu":
            busy.append(sum(int(t) for i, t in enumerate(ticks[:8]) if i not in (3, 4)))
    return [t / os.sysconf("SC_CLK_TCK") for t in busy]


def open_fds(pid):
    """`{"all": open file descriptors, "sockets": those that are sockets}` of `pid`."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # Closed meanwhile.
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return {"all": len(targets), "sockets": sum(t.startswith("socket:") for t in targets)}


def free_ports(count):
    """`count` distinct TCP ports that were free a moment ago (the kernel's choice)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]


def wall_time_in(seconds):
    """A wall-clock instant `seconds` from now (workers start measuring together at it)."""
    return time.time() + seconds
