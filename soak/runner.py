"""The soak itself: a job of easgd-train tasks in network namespaces, and its faults.

`run(config)` wires one host per task (`benchmarks.common.network.HostNetwork`: a namespace each, on
a bridge), starts the ps (1 or 2) and the workers there in task mode under a `LocalCluster`,
injects the schedule's faults one at a time (SIGKILL and restart, SIGSTOP and SIGCONT, the
host's switch port down and up), waits after each until every worker reports progress
again, lets the job finish, and returns a record: the faults with their costs and checks
(`measure`), the chief's summary and the verdict. Every wait has a deadline, and the
processes and namespaces go away however it ends.
"""

import dataclasses
import os
import signal
import sys
import time

from benchmarks.common import network
from soak import checks, digest, measure, stacks
from soak import schedule as schedule_module
from tf_contrib_easgd.runner import display, launcher
from tf_contrib_easgd.trainer import progress

PORT = 2222
#: Once every worker is within this fraction of its steps, no more faults: the job's end
#: (the final checkpoint, the export, the end flag) may be under way.
END_GUARD = 0.95


@dataclasses.dataclass(frozen=True)
class SoakConfig:
    """A soak: the job's flags, the schedule, the bounds and the checks.

    Attributes:
        schedule: the `schedule.Fault`s, in order.
        work_dir: where the job's `--model_dir` (`model/`), the tasks' logs (`logs/`) and
            the copies of restored checkpoints and of the first one after each
            (`restored/`) go.
        ps: the job's parameter servers, 1 or 2 (easgd-train spreads the centre over
            them, variable by variable).
        faults_required: the check "faults injected" wants this many (default: all).
        deadline_secs: the whole soak's deadline, from the start of the tasks.
        py_spy: dumps the stacks of silent workers into `stacks/` (`stacks.StackSampler`):
            None: py-spy on PATH, if any; "": never.
        echo: prints one line of what the soak does (None: quiet).
        The others are the easgd-train flags of the same names, the `measure.Bounds`, the
        accuracy the centre must reach, and the interpreter of the tasks.
    """

    schedule: tuple
    work_dir: str
    workers: int = 3
    ps: int = 1
    steps: int = 60000
    seed: int = 0
    communication_period: int = 10
    save_checkpoint_steps: int = 2000
    log_every_steps: int = 100
    eval_every_steps: int = 0
    batch_size: int = 32
    model: str = "mlp"
    timeout_secs: float = 120.0
    stall_report_secs: float = 3.0
    bounds: measure.Bounds = measure.Bounds()
    min_accuracy: float = 0.95
    faults_required: int | None = None
    deadline_secs: float = 1800.0
    py_spy: str | None = None
    python: str = sys.executable
    echo: object = print

    def task_flags(self):
        """The training flags every task gets."""
        return [
            f"--steps={self.steps}", f"--seed={self.seed}", f"--model={self.model}",
            f"--batch_size={self.batch_size}",
            f"--communication_period={self.communication_period}",
            f"--save_checkpoint_steps={self.save_checkpoint_steps}",
            f"--log_every_steps={self.log_every_steps}",
            f"--eval_every_steps={self.eval_every_steps}",
            f"--timeout_secs={self.timeout_secs:g}",
            f"--stall_report_secs={self.stall_report_secs:g}",
            f"--model_dir={os.path.join(self.work_dir, 'model')}", "--progress_format=json",
        ]  # fmt: skip


class _StopError(RuntimeError):
    """The soak cannot go on: a task failed, a wait passed its deadline."""


def host_of(task):
    """The network host of a task: `"ps 0"` -> `"ps0"`, `"worker 1"` -> `"w1"`."""
    return task.replace("worker ", "w").replace(" ", "")


class Soak:
    """One soak run; `run()` does it once."""

    def __init__(self, config):
        schedule_module.check_schedule(
            config.schedule, config.workers, config.stall_report_secs, ps=config.ps
        )
        self.config = config
        self.model_dir = os.path.join(config.work_dir, "model")
        self.events = []
        self.steps = {name: 0 for name in schedule_module.worker_names(config.workers)}
        self.restores = digest.Restores(self.model_dir, os.path.join(config.work_dir, "restored"))
        self.injections = []
        self.failure = None
        self._cluster = self._network = None
        self._started = self._deadline = None
        self._back = 0.0  # When the last fault's cost ended (`time.time()`).
        self._say = config.echo or (lambda text: None)
        self.sampler = stacks.StackSampler(os.path.join(config.work_dir, "stacks"), config.py_spy)

    # The tasks' output.

    def _on_line(self, task, line):
        del task  # Each event names its task.
        event = display.parse_event(line)
        if event is None:
            return
        self.events.append(event)
        name, kind = event["task"], event["event"]
        if name in self.steps and kind in ("started", "progress"):
            self.steps[name] = event["step"]
        elif name in self.steps and kind == "done":
            self.steps[name] = event["steps"]
        if kind == "started" and event.get("restored_from"):
            self.restores.add(event)
        if name == schedule_module.CHIEF and kind == "progress":
            self.restores.copy_later()
        if kind in ("stalled", "rejoining", "recovering", "warning", "summary"):
            self._say(f"  {progress.format_event(event)}")

    def _pump(self, secs):
        """Streams the tasks' output for `secs`; raises `_StopError` if a task failed."""
        try:
            self._cluster.wait_for_line(lambda task, line: False, secs)
        except launcher.TaskFailedError as error:
            tail = "\n".join(f"  | {line}" for line in error.tail[-10:])
            raise _StopError(f"{error} (log {error.log_path}):\n{tail}") from None

    def _wait(self, condition, timeout_secs, what, watch=False):
        """Streams output until `condition()`; raises `_StopError` at the deadline.

        With `watch`, also when a worker still training reports nothing for longer than
        the slack: between faults nothing excuses a silence.
        """
        deadline = min(time.monotonic() + timeout_secs, self._deadline)
        while not condition():
            quiet = measure.silence(self.events, self.config.workers, time.time())
            self.sampler.sample(quiet, {c.task.name: c.pid for c in self._cluster.children})
            if time.monotonic() > deadline:
                self._diagnose([name for name, secs in quiet.items() if secs > 5])
                raise _StopError(f"no {what} within {timeout_secs:.0f} s")
            stuck = {n: s for n, s in quiet.items() if s > self.config.bounds.slack_secs}
            if watch and stuck:
                self._diagnose(list(stuck))
                raise _StopError(
                    f"while waiting for {what}, no fault under way: "
                    + ", ".join(f"{n} silent for {s:.0f} s" for n, s in stuck.items())
                )
            self._pump(0.2)

    def _diagnose(self, names):
        """SIGABRTs the tasks `names` still running: Python's faulthandler (on in every
        task) writes each thread's stack to the task's log before it dies."""
        for name in names:
            child = self._child(name)
            if child.poll() is None:
                self._say(f"soak: {name} stuck; its threads' stacks go to {child.log_path}")
                child.signal(signal.SIGCONT)
                child.signal(signal.SIGABRT)
                child.wait(10)

    def _child(self, name):
        return next(c for c in self._cluster.children if c.task.name == name)

    # The run.

    def run(self):
        """Runs the soak; returns its record (see `record`)."""
        config = self.config
        hosts = {f"ps{i}": 1 + i for i in range(config.ps)}
        hosts.update({f"w{i}": 1 + config.ps + i for i in range(config.workers)})
        self._started = time.time()
        self._deadline = time.monotonic() + config.deadline_secs
        try:
            with (
                network.HostNetwork(hosts, name="easgd-soak") as self._network,
                launcher.sigterm_as_keyboard_interrupt(),
            ):
                self._cluster = launcher.LocalCluster(
                    self._tasks(), env=_child_env(), on_line=self._on_line,
                    log_dir=os.path.join(config.work_dir, "logs"),
                )  # fmt: skip
                try:
                    self._run_job()
                finally:
                    self._release_everything()
        except _StopError as error:
            self.failure = str(error)
            self._say(f"soak: ABORTED: {error}")
        except KeyboardInterrupt:
            self.failure = "interrupted"
        return self.record()

    def _tasks(self):
        config, net = self.config, self._network
        workers = ",".join(f"{net.address(f'w{i}')}:{PORT}" for i in range(config.workers))
        servers = ",".join(f"{net.address(f'ps{i}')}:{PORT}" for i in range(config.ps))
        tasks = []
        for job, count in (("ps", config.ps), ("worker", config.workers)):
            for index in range(count):
                name = f"{job} {index}"
                argv = (
                    *net.exec_prefix(host_of(name)), config.python, "-m",
                    "tf_contrib_easgd.trainer", "--cluster=task", f"--job_name={job}",
                    f"--task_index={index}", f"--ps_hosts={servers}",
                    f"--worker_hosts={workers}", *config.task_flags(),
                )  # fmt: skip
                tasks.append(launcher.TaskSpec(job, index, argv, finishes=job == "worker"))
        return tasks

    def _run_job(self):
        config = self.config
        self._cluster.start()
        bounds = config.bounds
        self._wait(
            lambda: all(measure.of(self.events, name, "progress") for name in self.steps),
            3 * bounds.startup_secs + bounds.slack_secs,
            "progress of every worker after the start",
        )
        self._back = time.time()
        self._say(f"soak: every worker trains, {self._back - self._started:.1f} s after the start")
        for fault in config.schedule:
            if not self._wait_for_turn(fault):
                self._say(f"soak: the workers near their end; {fault.index} faults injected")
                break
            self._inject(fault)
        self._say("soak: schedule done; waiting for the end of the job")
        workers = [c for c in self._cluster.children if c.task.finishes]
        self._wait(
            lambda: all(c.poll() == 0 for c in workers), config.deadline_secs, "end", watch=True
        )
        self._cluster.wait_for_servers(30)

    def _wait_for_turn(self, fault):
        """Waits until `fault` is due; False if the workers are too near their end."""
        config = self.config

        def due():
            if self._near_end():
                return True
            if min(self.steps.values()) < fault.at_fraction * config.steps:
                return False
            if time.time() < self._back + fault.settle_secs:
                return False
            # A ps restart loses what the centre gained since the latest checkpoint: the
            # soak measures one written since the last fault, a normal checkpoint interval.
            return fault.kind != schedule_module.KILL_PS or self._checkpoint_since(self._back)

        self._wait(due, config.deadline_secs, f"the turn of fault {fault.index}", watch=True)
        return not self._near_end()

    def _near_end(self):
        return min(self.steps.values()) >= END_GUARD * self.config.steps

    def _checkpoint_since(self, since):
        try:
            return os.path.getmtime(os.path.join(self.model_dir, "checkpoint")) > since
        except OSError:
            return False

    def _inject(self, fault):
        """Injects `fault`, waits until every worker is back (or its deadline); records it."""
        config, kind = self.config, fault.kind
        steps = ", ".join(f"{n.replace('worker ', 'w')} {s}" for n, s in self.steps.items())
        self._say(
            f"soak: #{fault.index} {kind} {fault.target}"
            + (f" for {fault.duration_secs:g} s" if fault.duration_secs else "")
            + f" at {time.time() - self._started:.1f} s (steps: {steps})"
        )
        injection = {"fault": fault.to_dict(), "injected": time.time()}
        self.injections.append(injection)
        if kind in schedule_module.KILLS:
            child = self._child(fault.target)
            child.signal(signal.SIGKILL)
            if child.wait(30) is None:
                raise _StopError(f"{fault.target} still ran 30 s after its SIGKILL")
            child.finish_reading(5)
            child.start()
        elif kind == schedule_module.FREEZE:
            child = self._child(fault.target)
            child.signal(signal.SIGSTOP)
            try:
                self._pump(fault.duration_secs)
            finally:
                child.signal(signal.SIGCONT)
        else:
            host = host_of(fault.target)
            self._network.unplug(host)
            try:
                self._pump(fault.duration_secs)
            finally:
                self._network.plug(host)
        injection["ended"] = time.time()
        injection["at_secs"] = injection["injected"] - self._started
        bound = config.bounds.of(kind, fault.duration_secs)

        def back():
            return measure.recovery(
                self.events, config.workers, injection["injected"], injection["ended"]
            )[0]

        self._wait(back, bound + config.bounds.slack_secs + 5, f"recovery from #{fault.index}")
        self._back = back()
        self._say(f"soak: #{fault.index} cost {self._back - injection['injected']:.1f} s")

    def _release_everything(self):
        """Continues frozen tasks, plugs every link, stops every task still running."""
        for child in self._cluster.children:
            child.signal(signal.SIGCONT)
        for host in self._network.hosts:
            self._network.plug(host)
        self._cluster.stop()
        self.sampler.close()
        self.exit_codes = {c.task.name: c.poll() for c in self._cluster.children}

    # The record.

    def record(self):
        """The soak's record: settings, faults with costs, summary, checks and verdict."""
        config = self.config
        allowed = measure.allowed_lost_exchanges(
            config.save_checkpoint_steps, config.communication_period, config.workers
        )
        for injection in self.injections:
            if injection["fault"]["kind"] == schedule_module.KILL_PS and "ended" in injection:
                injection.update(self.restores.assess_after(injection["ended"]))
        assessed = [
            (i, measure.assess(self.events, i, config.workers, config.bounds, allowed))
            for i in self.injections
            if "ended" in i
        ]
        summaries = [e for e in self.events if e["event"] == "summary"]
        summary = summaries[-1] if summaries else None
        check_config = {
            "faults": config.faults_required or len(config.schedule),
            "workers": config.workers,
            "steps": config.steps,
            "communication_period": config.communication_period,
            "min_accuracy": config.min_accuracy,
        }
        codes = getattr(self, "exit_codes", {})
        results = checks.check_job(summary, assessed, check_config, codes)
        if self.failure:
            results.append(checks.Check("soak ran to its end", False, self.failure))
        return {
            "settings": {
                key: value
                for key, value in dataclasses.asdict(config).items()
                if key not in ("schedule", "echo")
            },
            "allowed_lost_exchanges": allowed,
            "schedule": [fault.to_dict() for fault in config.schedule],
            "faults": [dict(injection, **result) for injection, result in assessed],
            "summary": summary,
            "checks": [dataclasses.asdict(check) for check in results],
            "passed": all(check.ok for check in results),
            "secs": time.time() - self._started if self._started else 0.0,
            "startup_secs": measure.startups(self.events),
            "namespaces": self._network.prefix if self._network else None,
            "stack_dumps": self.sampler.dumps,
            "events": self.events,
        }


def _child_env():
    """The tasks' environment: quiet TensorFlow, a stack dump on SIGABRT, no TF_CONFIG, and
    the checkout importable."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONFAULTHANDLER="1")
    env.pop("TF_CONFIG", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def run(config):
    """Runs a soak of `config`; returns its record."""
    return Soak(config).run()
