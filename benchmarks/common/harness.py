"""The benchmarks' shared harness: clusters of task processes driven over pipes, rounds.

`BenchCluster` runs a ps and worker processes (task.py and its kin), `ScaleCluster` up to
64 workers in a few host processes (scale_task.py); leaving either kills them all. Rounds
run the configurations forward on even rounds, backward on odd ones.
"""

import contextlib
import itertools
import json
import os
import pathlib
import queue
import subprocess
import sys
import threading
import time
import uuid

import portpicker
import psutil

from benchmarks.common import network, report
from benchmarks.common.protocol import parse_reply
from tf_contrib_easgd.job import freed_memory
from tf_contrib_easgd.runner.launcher import make_die_with_parent

START_TIMEOUT_SECS = 120.0  # Importing TensorFlow alone takes ~15 s on a loaded 2-core box.
TIMEOUT_SECS = 600.0  # Of a command.
HOST_PORT = 2222  # The port of a task that has a host of its own.
#: The scale harness on a 2-core machine: the ps tasks on one core, the workers on the other.
PS_CPUS, WORKER_CPUS = ("0", "1") if os.cpu_count() == 2 else (None, None)
ACCURACY_TARGET, ACCURACY_LEARNING_RATE = 0.97, 0.05
_containers = itertools.count()


class Process:
    """One child process and a thread that queues its answer lines."""

    def __init__(self, name, argv, log_path, environ):
        self.name, self.lines = name, queue.Queue()
        self.log = open(log_path, "w")  # noqa: SIM115 - closed in stop().
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **environ}
        self.process = subprocess.Popen(
            argv, cwd=report.ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, env=env,
            preexec_fn=make_die_with_parent(),  # noqa: PLW1509 - only prctl, no locks taken.
        )  # fmt: skip
        self.pid = self.process.pid
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            answer = parse_reply(line)
            if answer is not None:
                self.lines.put(answer)
        self.lines.put(None)  # End of output: the process exited.

    def send(self, command, **arguments):
        self.process.stdin.write(json.dumps({"cmd": command, **arguments}) + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_secs=TIMEOUT_SECS):
        try:
            message = self.lines.get(timeout=timeout_secs)
        except queue.Empty:
            raise RuntimeError(f"{self.name} gave no answer in {timeout_secs:.0f} s") from None
        if message is None:
            raise RuntimeError(f"{self.name} exited with code {self.process.wait(5)}")
        if not message.get("ok"):
            raise RuntimeError(f"{self.name}: {message.get('error')}")
        return message

    def stop(self):
        """Kills the process (ours: started by this object) and reaps it."""
        self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout, self.log):
            with contextlib.suppress(OSError):
                stream.close()


def call_all(processes, command, **arguments):
    """Sends `command` to every process at once; returns their answers in order."""
    for process in processes:
        process.send(command, **arguments)
    return [process.receive() for process in processes]


class _Cluster:
    """Processes of `module` in `log_dir`: `tasks` ((host, port), ps tasks first) on the
    `hosts` of a private network (rate-limited to `rate`), or in one network namespace
    (`netns`), or on loopback. Entering runs `_start`; leaving (or an error in `_start`)
    kills every process and deletes the namespaces."""

    module, netns, network, python = None, None, None, sys.executable

    def __init__(self, log_dir, tasks, hosts=None, rate=None, netns=False):
        self.log_dir, self.processes = pathlib.Path(log_dir), []
        if hosts:
            numbers = {host: byte for byte, host in enumerate(hosts, start=1)}
            self.network = network.HostNetwork(numbers, rate, name=f"easgd-{self.kind}")
            self.prefix = self.network.exec_prefix
            addresses = [f"{self.network.address(host)}:{port}" for host, port in tasks]
        else:
            self.netns = f"easgd-bench-{uuid.uuid4().hex[:8]}" if netns else None
            prefix = ["ip", "netns", "exec", self.netns] if netns else []
            self.prefix = lambda _: prefix
            addresses = [f"localhost:{port}" for port in free_ports(len(tasks))]
        ps = sum(name.startswith("ps") for name, _ in tasks)
        self.spec = {"ps": addresses[:ps], "worker": addresses[ps:]}

    def __enter__(self):
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            if self.netns:
                network.run_ip("netns", "add", self.netns)
                network.run_ip("-n", self.netns, "link", "set", "lo", "up")
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info):
        for process in self.processes:
            process.stop()
        self.processes = []
        if self.netns:
            network.run_ip("netns", "del", self.netns, check=False)
        if self.network is not None:
            self.network.delete()

    def _spawn(self, name, *arguments, pinned=(), environ=None):
        argv = [*self.prefix(name), *pinned, str(self.python), "-m", self.module,
                f"--cluster={json.dumps(self.spec)}", *arguments]  # fmt: skip
        self.processes.append(Process(name, argv, self.log_dir / f"{name}.log", environ or {}))
        return self.processes[-1]

    def stat(self, task=None):
        """(CPU seconds, minor page faults) of the processes, or the one named `task`."""
        stats = [process_stat(p.pid) for p in self.processes if task in (None, p.name)]
        return tuple(map(sum, zip(*stats, strict=True)))


class BenchCluster(_Cluster):
    """`num_ps` ps (ps0, ps1, ...) and `num_workers` worker processes of `module` run by
    `python`, in the variable `world` ("tf1" or "tf2"), on loopback, in a private network
    namespace (`netns`), or each on a host of its own whose link has `rate` ("1gbit");
    `cpus`: {"ps" or "worker": cpu ids} to pin them to, and {"links": cpu ids} to do the
    emulated links' receive work on (`HostNetwork.steer_receives`); `malloc`: with
    `reuse_freed_memory`'s allocator settings."""

    kind = "bench"

    def __init__(self, num_workers, log_dir, world="tf1", netns=False, rate=None, cpus=None,
                 python=sys.executable, module="benchmarks.common.task", malloc=True,
                 num_ps=1):  # fmt: skip
        if type(num_ps) is not int or num_ps < 1:
            raise ValueError(f"num_ps must be an int of at least 1, got {num_ps!r}")
        self.module, self.python, self.world, self.cpus = module, python, world, cpus or {}
        if self.cpus.get("links") and not rate:
            raise ValueError(f"cpus['links'] needs a shaped network (rate), got rate={rate!r}")
        self.num_ps, workers = num_ps, [f"worker{i}" for i in range(num_workers)]
        self.tasks = [f"ps{i}" for i in range(num_ps)] + workers
        hosts = self.tasks if rate else None
        super().__init__(log_dir, [(t, HOST_PORT) for t in self.tasks], hosts, rate, netns)
        self.num_workers, self.ready = num_workers, {}
        self.environ = freed_memory.environment() if malloc else {}

    def _start(self):
        if self.network is not None and self.cpus.get("links"):
            self.network.steer_receives(self.cpus["links"])
        for task in self.tasks:
            job = task.rstrip("0123456789")
            cpus = self.cpus.get(job)
            pinned = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
            arguments = (f"--role={job}", f"--index={task[len(job) :]}", f"--world={self.world}")
            self._spawn(task, *arguments, pinned=pinned, environ=self.environ)
        self.workers = self.processes[self.num_ps :]
        for process in self.processes:
            self.ready[process.name] = process.receive(START_TIMEOUT_SECS)

    def call(self, workers, command, **arguments):
        """Sends `command` to the workers (indices) at once; returns their answers."""
        return call_all([self.workers[w] for w in workers], command, **arguments)

    def build(self, config, model, workers, learning_rate=0.01, **extra):
        """Builds `config` on `workers`, worker 0 first (it initialises); checks that EASGD's
        exchanges go as the configuration says. Returns the resource container to release."""
        container = f"b{os.getpid()}x{next(_containers)}"
        arguments = {"config": config, "model": model, "num_workers": len(workers),
                     "container": container, "learning_rate": learning_rate, **extra}  # fmt: skip
        answers = self.call(workers[:1], "build", **arguments)
        answers += self.call(workers[1:], "build", **arguments)
        expected = None
        if config.startswith("naive-") or (config.startswith("easgd-") and "-overlap" in config):
            expected = "none"  # Its exchange: ops in a cond, or a queue runner's session.run.
        elif config.startswith(("easgd-", "copy-easgd-")):
            expected = "remote_call" if "-remotecall" in config else "direct"
        transports = [answer.get("transport") for answer in answers]
        if any(transport != expected for transport in transports):
            raise RuntimeError(f"{config}: exchange transports {transports}, expected {expected}")
        return container

    def release(self, workers, container):
        """Closes the sessions of `workers` and resets `container`."""
        self.call(workers, "close")
        self.call(workers[:1], "reset", containers=[container])


def interleaved(items, round_index):
    return items if round_index % 2 == 0 else tuple(reversed(items))


def timed_window(cluster, workers, seconds, warm_secs):
    """Steps/s of each of `workers` over a window of `seconds` they start together."""
    answers = cluster.call(workers, "run", start_at=wall_time_in(warm_secs), seconds=seconds)
    return {"per_worker": [answer["steps_per_sec"] for answer in answers]}, ""


def window_with_bytes(cluster, workers, seconds, warm_secs):
    """A window on a shaped network: each worker's steps over the time to its last step in
    the window, the bytes of the ps's link in it and each task's CPU share."""
    start_at, processes = wall_time_in(warm_secs), [cluster.workers[w] for w in workers]
    tasks = cluster.tasks
    for process in processes:
        process.send("run", start_at=start_at, seconds=seconds)
    time.sleep(max(0.0, start_at - time.time()))
    before, cpu = sum(cluster.network.link_bytes("ps0")), {t: cluster.stat(t)[0] for t in tasks}
    time.sleep(max(0.0, start_at + seconds - time.time()))
    after = sum(cluster.network.link_bytes("ps0"))
    cpu = {t: (cluster.stat(t)[0] - cpu[t]) / seconds for t in tasks}
    answers = [process.receive() for process in processes]
    measured = {
        "per_worker": [a["steps"] / a["elapsed"] if a["elapsed"] > 0 else 0.0 for a in answers],
        "steps": [a["steps"] for a in answers], "ps_bytes": after - before, "seconds": seconds,
        "cpu_share": cpu,
    }  # fmt: skip
    return measured, f", {report.link_bytes_per_step(measured) / 1e6:.2f} MB per step on the link"


def throughput(cluster, model, configs, rounds, seconds, warm_secs, log):
    """{config: [{"round", "per_worker": steps/s of each worker, ...}]}: of `timed_window`,
    or `window_with_bytes` on a shaped network."""
    workers, results = list(range(cluster.num_workers)), {config: [] for config in configs}
    measure = window_with_bytes if cluster.network else timed_window
    for round_index in range(rounds):
        for config in interleaved(configs, round_index):
            container = cluster.build(config, model, workers)
            measured, note = measure(cluster, workers, seconds, warm_secs)
            cluster.release(workers, container)
            results[config].append({"round": round_index, **measured})
            rates = " ".join(f"{v:6.1f}" for v in measured["per_worker"])
            log(f"  {model} {config:>15} round {round_index}: {rates} steps/s{note}")
    return results


def time_to_accuracy(cluster, configs, repeats, seconds, eval_every, log, lead_secs=1.0):
    """Learning curves of the digits model, `configs` ((config, workers or None: all), ...)
    trained for `seconds` from `lead_secs` after the command, worker 0 evaluating the shared
    model every `eval_every` s: {config: [{"curve": [(secs, accuracy, steps)], "steps"}]}."""
    results = {config: [] for config, _ in configs}
    for repeat in range(repeats):
        for config, workers in configs:
            team = list(range(workers or cluster.num_workers))
            container = cluster.build(config, "digits-mlp-2.2M", team, ACCURACY_LEARNING_RATE)
            window = {"start_at": wall_time_in(lead_secs), "seconds": seconds}
            answers = cluster.call(team, "train", eval_every=eval_every, **window)
            cluster.release(team, container)
            curve = answers[0]["curve"]
            results[config].append({"curve": curve, "steps": [a["steps"] for a in answers]})
            reached = report.first_time_at(curve, ACCURACY_TARGET)
            reached = "None" if reached is None else round(reached, 1)
            log(f"  {config:>8} x{len(team)} repeat {repeat}: final {curve[-1][1]:.3f}, "
                f"{ACCURACY_TARGET} after {reached} s")  # fmt: skip
    return results


class ScaleCluster(_Cluster):
    """`max_ps` ps tasks (fresh each `start_ps`) and `num_workers` worker tasks in
    `num_hosts` host processes, worker w on host w % num_hosts. With `netns` each process
    is a host of a private network whose ps links can be limited (`set_ps_rate`); else
    they talk over loopback. `malloc=False` leaves the C allocator as it is."""

    module, kind = "benchmarks.common.scale_task", "scale"

    def __init__(self, max_ps, num_workers, num_hosts, log_dir, netns=True, malloc=True):
        self.max_ps, self.num_workers, self.num_hosts = max_ps, num_workers, num_hosts
        hosts = [f"ps{i}" for i in range(max_ps)] + [f"wk{h}" for h in range(num_hosts)]
        tasks = [(f"wk{w % num_hosts}", HOST_PORT + 1 + w // num_hosts) for w in range(num_workers)]
        tasks = [(f"ps{i}", HOST_PORT) for i in range(max_ps)] + tasks
        super().__init__(log_dir, tasks, hosts if netns else None)
        self.ps, self.hosts, self.malloc = {}, [], malloc

    def _start(self):
        for host in range(self.num_hosts):
            workers = ",".join(map(str, self.host_workers(host, self.num_workers)))
            self.hosts.append(self._start_task(f"wk{host}", "--role=worker", f"--index={workers}"))
        for process in self.hosts:
            process.receive(START_TIMEOUT_SECS)

    def host_workers(self, host, workers):
        """The task indices among the first `workers` that live on `host`."""
        return list(range(host, workers, self.num_hosts))

    def _start_task(self, name, *arguments):
        # A blocked exchange holds an inter-op thread: two per worker of a host.
        threads = 2 * len(self.host_workers(0, self.num_workers)) + 4
        environ = freed_memory.environment() if self.malloc else {}
        return self._spawn(
            name, *arguments, environ={**environ, "TF_NUM_INTEROP_THREADS": str(threads)}
        )

    def start_ps(self):
        """(Re)starts every ps task fresh (a reset needs every task up)."""
        self.stop_ps()
        for i in range(self.max_ps):
            self.ps[i] = self._start_task(f"ps{i}", "--role=ps", f"--index={i}")
        for process in self.ps.values():
            process.receive(START_TIMEOUT_SECS)

    def stop_ps(self):
        for process in self.ps.values():
            process.stop()
            self.processes.remove(process)
        self.ps = {}

    def ps_memory(self, count):
        """`{"rss", "rss_used"}` of each of the first `count` ps tasks: the resident set,
        then again once glibc handed back the free memory it keeps (`trim_memory`)."""
        ps = [self.ps[i] for i in range(count)]
        held = [rss_bytes(process.pid) for process in ps]
        call_all(ps, "trim_memory")
        return [{"rss": rss, "rss_used": rss_bytes(p.pid)} for rss, p in zip(held, ps, strict=True)]

    def pin(self, pinned=True):
        """Pins every thread of the ps tasks to PS_CPUS and of the hosts to WORKER_CPUS, or
        unpins them (builds and start-ups use every core)."""
        every = set(range(os.cpu_count()))
        for processes, cpus in ((self.ps.values(), PS_CPUS), (self.hosts, WORKER_CPUS)):
            mask = {int(cpu) for cpu in cpus.split(",")} if pinned and cpus else every
            for process in processes:
                for thread in psutil.Process(process.pid).threads():
                    with contextlib.suppress(OSError):  # A thread that has just ended.
                        os.sched_setaffinity(thread.id, mask)

    def call(self, host, command, **arguments):
        return call_all([self.hosts[host]], command, **arguments)[0]

    def call_hosts(self, commands, meanwhile=None):
        """Sends `{host: (command, arguments)}` at once, runs `meanwhile()` if given;
        returns `({host: answer}, what meanwhile returned)`."""
        for host, (command, arguments) in commands.items():
            self.hosts[host].send(command, **arguments)
        during = meanwhile() if meanwhile else None
        return {host: self.hosts[host].receive() for host in commands}, during

    def counters(self):
        """CPU seconds of the ps tasks, of the hosts and of each CPU (everyone's), and the
        bytes of each ps task's link (None without namespaces)."""
        links = [sum(self.network.link_bytes(f"ps{i}")) for i in self.ps] if self.network else None
        ps_cpu = [process_stat(p.pid)[0] for p in self.ps.values()]
        hosts_cpu = sum(process_stat(h.pid)[0] for h in self.hosts)
        return {"cpus": cpu_busy_secs(), "ps_cpu": ps_cpu, "hosts_cpu": hosts_cpu, "ps_link": links}

    def set_ps_rate(self, rate):
        """Limits every ps task's link to `rate` ("1gbit"), or lifts the limit (None)."""
        for index in range(self.max_ps):
            self.network.set_rate(f"ps{index}", rate)


def process_stat(pid):
    """(CPU seconds, user and system, and minor page faults) of process `pid`: read from
    /proc, as psutil gives no page faults."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), int(fields[7])


def rss_bytes(pid):
    """Resident set size of process `pid`."""
    return psutil.Process(pid).memory_info().rss


def cpu_busy_secs():
    """Busy seconds of each CPU so far, whoever used it (all but idle and iowait)."""
    return [sum(cpu) - cpu.idle - cpu.iowait - cpu.guest - cpu.guest_nice
            for cpu in psutil.cpu_times(percpu=True)]  # fmt: skip


def open_fds(pid):
    """`{"all": open file descriptors, "sockets": those that are sockets}` of `pid`."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # Closed meanwhile.
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return {"all": len(targets), "sockets": sum(t.startswith("socket:") for t in targets)}


def free_ports(count):
    """`count` distinct free TCP ports (portpicker's)."""
    return [portpicker.pick_unused_port() for _ in range(count)]


def wall_time_in(seconds):
    """A wall-clock instant `seconds` from now (workers start measuring together at it)."""
    return time.time() + seconds
