"""A benchmark cluster: ps and worker processes on loopback, optionally in a network namespace.

`BenchCluster` starts one process per task (`python -m benchmarks.task`, or another
interpreter and module that speak the same protocol: `benchmarks.contrib_task` under
TensorFlow 1.15's Python), talks to the workers over their stdin/stdout, and stops every
process it started when it is closed, on error too. Every wait has a deadline.

With `netns=True` (root and `ip netns` needed) the processes run in a private network
namespace made for this cluster alone, so the loopback counters of that namespace count
the cluster's traffic and nothing else; the namespace is deleted on close. With a `rate`
("1gbit"), each task runs on a host of its own instead, a namespace whose link to a
private switch is limited to that rate both ways (`HostNetwork`), as on separate machines
whose network cards are the bottleneck.
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

from benchmarks.task_protocol import REPLY_PREFIX
from tf_contrib_easgd.job import freed_memory
from tf_contrib_easgd.trainer import network
from tf_contrib_easgd.trainer.launcher import make_die_with_parent

ROOT = pathlib.Path(__file__).resolve().parent.parent
HOST_PORT = 2222  # The port of every task on a shaped network (a host per task).
START_TIMEOUT_SECS = 120.0  # Importing TensorFlow alone takes ~15 s on a loaded 2-core box.


class BenchError(RuntimeError):
    """A benchmark process failed, answered with an error, or did not answer in time."""


class _Process:
    """One child process and a thread that queues its answer lines."""

    def __init__(self, name, argv, log_path, environ=None):
        self.name = name
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop().
        self.lines = queue.Queue()
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={
                **os.environ,
                "TF_CPP_MIN_LOG_LEVEL": "2",
                "PYTHONUNBUFFERED": "1",
                **(environ or {}),
            },
            preexec_fn=make_die_with_parent(),  # noqa: PLW1509 - only prctl, no locks taken.
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith(REPLY_PREFIX):
                self.lines.put(json.loads(line[len(REPLY_PREFIX) :]))
        self.lines.put(None)  # End of output: the process exited.

    def send(self, command):
        self.process.stdin.write(json.dumps(command) + "\n")
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
        """Kills the process (it is ours: started by this object) and reaps it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self.log.close()


class StopsOnExit:
    """A context manager of processes: entering it runs `_start`, leaving it (or an error
    in `_start`) runs `close`, which stops whatever was started."""

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self.close()


class BenchCluster(StopsOnExit):
    """`num_ps` parameter servers and `num_workers` workers, each in its own process.

    Use as a context manager; leaving it kills every process and deletes the namespace.

    Args:
        num_ps: parameter server processes.
        num_workers: worker processes.
        world: "tf1" or "tf2", passed to each process as `--world`.
        log_dir: folder of the processes' stderr logs.
        netns: whether to run the processes in a private network namespace.
        rate: a `tc` rate ("1gbit"): each task on a host of its own whose link has that
            rate; `netns` is then ignored.
        python: the interpreter of the processes (default: this one).
        module: the module each process runs (`python -m`).
        reuse_freed_memory: whether each process starts with the C allocator settings of
            `tf_contrib_easgd.reuse_freed_memory` (from its environment), as easgd-train's
            tasks do.
        cpus: None, or {"ps": cpu ids, "worker": cpu ids}: the CPUs each task of that job
            may run on (`taskset`).
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
        self.num_ps = num_ps
        self.num_workers = num_workers
        self.world = world
        self.log_dir = pathlib.Path(log_dir)
        self.netns = f"easgd-bench-{uuid.uuid4().hex[:8]}" if netns and rate is None else None
        self.rate = rate
        self.network = None
        self.python = str(python)
        self.module = module
        self.processes = []
        self.workers = []
        self.ready = {}  # Task name ("ps0", "worker1") -> its first answer.
        self.environ = freed_memory.environment() if reuse_freed_memory else {}
        self.cpus = cpus or {}

    def _start(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        tasks = [f"ps{i}" for i in range(self.num_ps)]
        tasks += [f"worker{i}" for i in range(self.num_workers)]
        prefix = {task: [] for task in tasks}
        if self.rate is not None:
            hosts = {task: byte for byte, task in enumerate(tasks, start=1)}
            self.network = network.HostNetwork(hosts, self.rate, name="easgd-bench")
            prefix = {task: self.network.exec_prefix(task) for task in tasks}
            # Each task has a host of its own, so all can listen on the same port.
            address = {task: f"{self.network.address(task)}:{HOST_PORT}" for task in tasks}
        else:
            if self.netns:
                network.run_ip("netns", "add", self.netns)
                network.run_ip("-n", self.netns, "link", "set", "lo", "up")
                prefix = {task: ["ip", "netns", "exec", self.netns] for task in tasks}
            ports = _free_ports(len(tasks))
            address = {task: f"localhost:{port}" for task, port in zip(tasks, ports, strict=True)}
        cluster = {
            job: [address[task] for task in tasks if task.startswith(job)]
            for job in ("ps", "worker")
        }
        for job, count in (("ps", self.num_ps), ("worker", self.num_workers)):
            for index in range(count):
                pinned = []
                if job in self.cpus:
                    pinned = ["taskset", "-c", ",".join(map(str, self.cpus[job]))]
                argv = [
                    *prefix[f"{job}{index}"],
                    *pinned,
                    self.python,
                    "-m",
                    self.module,
                    f"--role={job}",
                    f"--index={index}",
                    f"--cluster={json.dumps(cluster)}",
                    f"--world={self.world}",
                ]
                name = f"{job}{index}"
                process = _Process(name, argv, self.log_dir / f"{name}.log", self.environ)
                self.processes.append(process)
                if job == "worker":
                    self.workers.append(process)
        for process in self.processes:
            self.ready[process.name] = process.receive(START_TIMEOUT_SECS)

    def call(self, worker, command, timeout_secs, **arguments):
        """Sends `command` to worker `worker` and returns its answer."""
        process = self.workers[worker]
        process.send({"cmd": command, **arguments})
        return process.receive(timeout_secs)

    def call_all(self, workers, command, timeout_secs, **arguments):
        """Sends `command` to several workers at once; returns their answers in order."""
        for worker in workers:
            self.workers[worker].send({"cmd": command, **arguments})
        return [self.workers[w].receive(timeout_secs) for w in workers]

    def cpu_seconds(self, task=None):
        """CPU time (user + system) the cluster's processes, or the one of `task` ("ps0"),
        have used so far (Linux)."""
        return sum(
            process_stat(process.process.pid)["cpu_secs"]
            for process in self.processes
            if task in (None, process.name)
        )

    def page_faults(self, task):
        """Minor page faults of `task`'s process so far (Linux)."""
        (process,) = [p for p in self.processes if p.name == task]
        return process_stat(process.process.pid)["minor_faults"]

    def link_bytes(self, task):
        """`(sent, received)` bytes of the link of `task` ("ps0") so far; needs a `rate`."""
        return self.network.link_bytes(task)

    def close(self):
        """Kills every process started and deletes the namespaces."""
        for process in self.processes:
            process.stop()
        self.processes, self.workers = [], []
        if self.netns:
            network.run_ip("netns", "del", self.netns, check=False)
        if self.network is not None:
            self.network.delete()


def process_stat(pid):
    """CPU seconds (user + system) and minor page faults of process `pid`, from /proc."""
    stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # After "pid (comm)": state is field 3.
    return {
        "cpu_secs": (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"),
        "minor_faults": int(fields[7]),  # minflt: field 10.
    }


def _free_ports(count):
    """`count` distinct TCP ports that were free a moment ago (the kernel's choice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("localhost", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def process_cpu_secs(pid):
    """CPU time (user + system) process `pid` has used so far (Linux)."""
    return process_stat(pid)["cpu_secs"]


def wall_time_in(seconds):
    """A wall-clock instant `seconds` from now (workers start measuring together at it)."""
    return time.time() + seconds
