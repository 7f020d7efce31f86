"""The strategies section's jobs: one training run of a contender, its processes and numbers.

A job is the processes of one contender (common/strategy_task.py, or easgd-train in task mode),
each pinned to its cores, on loopback or on a `HostNetwork` whose links may be limited;
it trains for a given number of seconds from the moment the evaluating process begins, and
yields the learning curve, examples/s per worker and the bytes on the links. Leaving a job
kills every process it started and deletes its network, on error too.
"""

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from benchmarks.common import network, report
from benchmarks.common.harness import free_ports, process_stat
from benchmarks.common.protocol import parse_reply
from tf_contrib_easgd.runner.display import parse_event

BATCH = 32  # Examples of a worker step (strategy_task.BATCH, easgd-train's --batch_size).
WORKERS = 2
PORT = 2222  # Of a task on a host of its own.
#: Each process: (name, role, cpus). A worker has a core of its own, as on a machine of its
#: own; the ps and PSS's coordinator may use both cores (here they share the workers').
WORKER_CPUS = ("0", "1")
SHARED_CPUS = "0,1"
KINDS = ("pss", "mwms", "callback", "easgd-train")
#: Every process gets these inter-op threads: pinned to one core TensorFlow would make one,
#: and PSS's worker functions (an iterator and a step waiting on each other) deadlock on it.
INTEROP_THREADS = "8"
START_SECS = 240.0  # From the spawn to the end of training, beyond `seconds`: imports, links.
END_SECS = 120.0  # From the end of training to every trainer's exit (the chief's waits).
EVAL_EVERY_STEPS = 200  # easgd-train's chief evaluates the centre every this many steps.
LOG_EVERY_STEPS = 100


def processes(kind):
    """The (name, role, cpus) of a `kind` job, ps tasks first."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
    workers = [(f"worker{i}", "worker", WORKER_CPUS[i]) for i in range(WORKERS)]
    if kind == "mwms":
        return workers
    ps = [("ps0", "ps", SHARED_CPUS)]
    return ps + workers + ([("chief", "chief", SHARED_CPUS)] if kind == "pss" else [])


def trainers(kind):
    """The names of the processes whose end is the job's end (the others are killed)."""
    return {"pss": ["chief"], "easgd-train": ["worker0"]}.get(kind, ["worker0", "worker1"])


def cluster_spec(kind, addresses):
    """{job: [address]} of a `kind` job from {process name: address}."""
    spec = {}
    for name, role, _ in processes(kind):
        spec.setdefault(role, []).append(addresses[name])
    return spec


def argv(kind, name, role, spec, options):
    """The command line of process `name` of a `kind` job; `options`: the run's settings
    ({"model", "learning_rate", "seconds", ...}; "model_dir" for easgd-train)."""
    index = name.removeprefix(role) or "0"
    if kind == "easgd-train":
        return [sys.executable, "-m", "tf_contrib_easgd.trainer", "--cluster=task",
                f"--job_name={role}", f"--task_index={index}",
                f"--ps_hosts={','.join(spec['ps'])}",
                f"--worker_hosts={','.join(spec['worker'])}", f"--model={options['model']}",
                f"--learning_rate={options['learning_rate']}", "--steps=100000000",
                f"--eval_every_steps={EVAL_EVERY_STEPS}", f"--log_every_steps={LOG_EVERY_STEPS}",
                "--progress_format=json", f"--model_dir={options['model_dir']}"]  # fmt: skip
    command = [sys.executable, "-m", "benchmarks.common.strategy_task", f"--contender={kind}",
               f"--role={role}", f"--index={index}", f"--cluster={json.dumps(spec)}"]  # fmt: skip
    for key in ("model", "learning_rate", "seconds", "eval_secs", "epoch_steps",
                "steps_per_execution", "wire_dtype", "moving_rate"):  # fmt: skip
        if options.get(key) is not None:
            command.append(f"--{key}={options[key]}")
    return command + (["--overlap"] if options.get("overlap") else [])


def environment(kind, options):
    """The variables a `kind` process needs beyond ours."""
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1",
           "TF_NUM_INTEROP_THREADS": INTEROP_THREADS}  # fmt: skip
    if kind == "pss" or (kind == "mwms" and options.get("keras") == "tf-keras"):
        env["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 has no PSS at all.
    if kind == "pss":
        env["GRPC_FAIL_FAST"] = "use_caller"  # PSS's documentation: every task.
    return env


def replies(text):
    """The `protocol.reply` answers in a process's output."""
    return [a for a in map(parse_reply, text.splitlines()) if a is not None]


def events(text):
    """easgd-train's JSON events in a process's output."""
    return [e for e in map(parse_event, text.splitlines()) if e is not None]


def easgd_train_result(outputs):
    """{"curve", "rates", "examples", "t0"} of easgd-train's tasks from their outputs
    ({name: text}): the chief's centre evaluations timed from its "started" event (at wall
    time t0), each worker's steps/s from its start to its last progress report, and the
    examples of those steps."""
    curve, rates, steps, t0 = [], [], 0, None
    for name in sorted(n for n in outputs if n.startswith("worker")):
        seen = events(outputs[name])
        started = next((e["time"] for e in seen if e["event"] == "started"), None)
        progress = [e for e in seen if e["event"] == "progress"]
        if started is None or not progress:
            continue
        last = progress[-1]
        steps += last["step"]
        rates.append(last["step"] / max(last["time"] - started, 1e-9))
        if name == "worker0":
            t0 = started
            curve = [(e["time"] - started, e["accuracy"], e["step"])
                     for e in seen if e["event"] == "centre"]  # fmt: skip
    return {"curve": curve, "rates": rates, "examples": steps * BATCH, "t0": t0}


def training_cpu(samples, start):
    """{name: CPU seconds from `start` (wall time) to its last sample} of `samples`
    ([(wall time, {name: CPU seconds so far})], in order): from its first sample at or
    after `start`; {} without `start`."""
    if start is None:
        return {}
    first, last = {}, {}
    for wall, cpu in samples:
        for name, secs in cpu.items():
            if wall >= start:
                first.setdefault(name, secs)
            last[name] = secs
    return {name: last[name] - secs for name, secs in first.items()}


def strategy_result(kind, answers):
    """{"curve", "rates", "examples"} from the trainers' answers: PSS's steps are its
    coordinator's (every worker's), shared by the workers; the others' each worker's own."""
    curve = next((a["curve"] for a in answers if a.get("curve")), [])
    share = WORKERS if kind == "pss" else 1
    rates = [a["steps"] / share / a["secs"] for a in answers if a["secs"] > 0]
    examples = sum(a["steps"] for a in answers) * BATCH
    return {"curve": [tuple(point) for point in curve], "rates": rates, "examples": examples}


class Job:
    """The processes of one run of `kind`, with `options`, in `log_dir`: on a network of
    hosts limited to `rate` (None: not limited), or on loopback (`hosts=False`)."""

    def __init__(self, kind, options, log_dir, hosts=True, rate=None):
        self.kind, self.options, self.log_dir = kind, dict(options), pathlib.Path(log_dir)
        self.names = processes(kind)
        self.hosts, self.rate, self.network, self.children = hosts, rate, None, {}
        self.samples = []  # Of `_sample_cpu`, every half second of `run`.

    def __enter__(self):
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.hosts:
                numbers = {name: i for i, (name, _, _) in enumerate(self.names, start=1)}
                self.network = network.HostNetwork(numbers, self.rate, name="easgd-strat")
                addresses = {n: f"{self.network.address(n)}:{PORT}" for n, _, _ in self.names}
            else:
                ports = free_ports(len(self.names))
                addresses = {
                    n: f"localhost:{p}" for (n, _, _), p in zip(self.names, ports, strict=True)
                }
            self.spec = cluster_spec(self.kind, addresses)
            if self.kind == "easgd-train":
                self.options["model_dir"] = tempfile.mkdtemp(prefix="model-", dir=self.log_dir)
            for name, role, cpus in self.names:
                self._spawn(name, role, cpus)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _spawn(self, name, role, cpus):
        prefix = self.network.exec_prefix(name) if self.network else []
        command = [*prefix, "taskset", "-c", cpus,
                   *argv(self.kind, name, role, self.spec, self.options)]  # fmt: skip
        env = {**os.environ, **environment(self.kind, self.options)}
        out = open(self.log_dir / f"{name}.out", "w+")  # noqa: SIM115 - closed in __exit__.
        err = open(self.log_dir / f"{name}.err", "w")  # noqa: SIM115 - closed in __exit__.
        child = subprocess.Popen(command, cwd=report.ROOT, stdout=out, stderr=err, env=env,
                                 stdin=subprocess.DEVNULL)  # fmt: skip
        self.children[name] = (child, out, err)

    def output(self, name):
        return (self.log_dir / f"{name}.out").read_text()

    def link_bytes(self):
        """{name: bytes sent + received on its link so far}, or {} on loopback."""
        if self.network is None:
            return {}
        return {name: sum(self.network.link_bytes(name)) for name, _, _ in self.names}

    def run(self, deadline_secs):
        """Waits for the trainers' end (easgd-train: its chief's first evaluation past the
        run's seconds); returns {"curve", "rates", "examples", "bytes" (each link's over the
        job), "cpu" (each process's from the start of training), ...}.

        Raises:
            RuntimeError: if a trainer exits without an answer, or none comes by then.
        """
        before, deadline = self.link_bytes(), time.monotonic() + deadline_secs
        ends, answers = trainers(self.kind), []
        while True:
            self._sample_cpu()
            if self.kind == "easgd-train":
                result = easgd_train_result({n: self.output(n) for n, _, _ in self.names})
                past = [p for p in result["curve"] if p[0] >= self.options["seconds"]]
                if past:
                    break
            elif all(self.children[n][0].poll() is not None for n in ends):
                answers = [a for n in ends for a in replies(self.output(n))]
                if len(answers) < len(ends):
                    raise RuntimeError(f"{self.kind}: a trainer exited without an answer; "
                                       f"see {self.log_dir}")  # fmt: skip
                result = strategy_result(self.kind, answers)
                break
            for name, (child, _, _) in self.children.items():
                if child.poll() not in (None, 0):
                    raise RuntimeError(f"{self.kind}: {name} exited with {child.returncode}; "
                                       f"see {self.log_dir}")  # fmt: skip
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind}: no end in {deadline_secs:.0f} s; see "
                                   f"{self.log_dir}")  # fmt: skip
            time.sleep(0.5)
        after = self.link_bytes()
        moved = {name: after[name] - before[name] for name in after}
        start = min((a["t0"] for a in answers), default=result.get("t0"))
        cpu = training_cpu(self.samples, start)
        return dict(result, bytes=moved, cpu=cpu, answers=answers, spec=self.spec)

    def _sample_cpu(self):
        """Appends (wall time, {name: CPU seconds so far}) of the processes still running."""
        cpu = {}
        for name, (child, _, _) in self.children.items():
            with contextlib.suppress(OSError):  # Exited meanwhile.
                if child.poll() is None:
                    cpu[name] = process_stat(child.pid)[0]
        self.samples.append((time.time(), cpu))

    def __exit__(self, *exc_info):
        for child, out, err in self.children.values():
            if child.poll() is None:
                child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(10)
            out.close()
            err.close()
        self.children = {}
        if self.network is not None:
            self.network.delete()
            self.network = None
