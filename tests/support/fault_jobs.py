"""A job of easgd-train for the fault tests: one ps and two workers, as child processes.

`Job` starts the tasks in task mode (`--progress_format=json`), collects their events, and
kills and restarts them on request; tests/e2e/test_faults.py and test_keras_fit.py use it.
"""

import os
import signal

from processes import child_env, easgd_train_tasks

from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.runner.display import parse_event

STEPS = 1000
PERIOD = 10
TIMEOUT_SECS = 60  # --timeout_secs of the tasks: every wait of a task on another one.
DEADLINE_SECS = 240  # Of any wait of this test on the tasks.
# 1000 local steps of batch 32 are ~22 epochs of a worker's 721 digits: the centre's
# accuracy on the 355 test digits is 0.96-0.98 in these runs (0.97 without faults); chance
# is 0.1. 0.9 leaves room for a centre set back to a checkpoint.
MIN_ACCURACY = 0.9


class Job:
    """A ps and two workers of easgd-train as child processes; events collected per task."""

    def __init__(self, model_dir, *extra_flags):
        tasks = easgd_train_tasks(
            (
                f"--steps={STEPS}",
                "--log_every_steps=50",
                f"--communication_period={PERIOD}",
                f"--model_dir={model_dir}",
                f"--timeout_secs={TIMEOUT_SECS}",
                "--eval_every_steps=0",
                *extra_flags,
            )  # fmt: skip
        )
        self.model_dir = str(model_dir)
        self.events = []
        self.cluster = launcher.LocalCluster(
            tasks,
            env=child_env(),
            log_dir=os.path.join(self.model_dir, "logs"),
            on_line=self._on_line,
            stall_timeout_secs=DEADLINE_SECS,
        )

    def _on_line(self, task_spec, line):
        del task_spec  # Every event names its task.
        event = parse_event(line)
        if event:
            self.events.append(event)

    def __enter__(self):
        self.cluster.__enter__()
        return self

    def __exit__(self, *exc_info):
        self.cluster.__exit__(*exc_info)

    def child(self, name):
        return next(c for c in self.cluster.children if c.task.name == name)

    def start(self, *names):
        self.cluster.start(only=list(names) or None)

    def wait_for_step(self, name, step):
        """Streams output until task `name` reports local step `step` or later."""
        self.wait_for(name, lambda e: e["event"] == "progress" and e["step"] >= step, step)

    def wait_for(self, name, condition, what):
        """Streams output until task `name` reports an event for which `condition` holds,
        or returns at once if it has (a wait for another task may have read it)."""
        if any(e["task"] == name and condition(e) for e in self.events):
            return

        def seen(task_spec, line):
            event = parse_event(line)
            return task_spec.name == name and event is not None and condition(event)

        assert self.cluster.wait_for_line(seen, DEADLINE_SECS), f"{name} never reached {what}"

    def hold(self, name, step, until, until_step):
        """Freezes task `name` (SIGSTOP) once it reports local step `step`, until task `until`
        reports `until_step`: a worker that started seconds earlier (the other's TensorFlow
        import is slower on a busy machine) may otherwise finish before the other gets going.
        A pause of a worker is one of the schedules EASGD allows (a slow worker)."""
        self.wait_for_step(name, step)
        child = self.child(name)
        child.signal(signal.SIGSTOP)
        try:
            self.wait_for_step(until, until_step)
        finally:
            child.signal(signal.SIGCONT)

    def kill(self, name):
        """SIGKILLs task `name` and waits until it is gone."""
        child = self.child(name)
        child.signal(signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
        child.finish_reading(5)

    def restart(self, name):
        self.child(name).start()

    def restart_during_training(self, name, step):
        """Runs the job, kills `name` once it reports local step `step`, starts it again
        on its port and lets the job finish; returns the summary."""
        self.start()
        self.wait_for_step(name, step)
        self.kill(name)
        self.restart(name)
        return self.finish()

    def finish(self):
        """Waits until both workers exited 0 and the ps stopped; returns the summary."""
        self.cluster.supervise()
        assert self.cluster.wait_for_servers(30), "the ps did not stop after the chief"
        summary = self.summary()
        print(  # The figures of docs/RELIABILITY.md (pytest -s).
            f"\nsummary: local steps {summary['local_steps']}, {summary['exchanges']} "
            f"exchanges, centre accuracy {summary['test_accuracy']:.4f}"
        )
        return summary

    def summary(self):
        return next(e for e in self.events if e["event"] == "summary")

    def of(self, name, kind):
        """The events of `kind` that task `name` reported, in order."""
        return [e for e in self.events if e["task"] == name and e["event"] == kind]
