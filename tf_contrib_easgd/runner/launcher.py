"""A local multi-process cluster: start tasks as child processes, watch them, stop them.

`LocalCluster` runs one OS process per task (any command line), streams each child's
output to a callback and a log file, restarts a failed child if allowed, and stops every
child it started when it leaves, whatever the reason; `sigterm_as_keyboard_interrupt` makes
SIGTERM end it as Ctrl-C does. easgd-train's local mode (`local`)
and the tests use it; docs/DESIGN.md ("The trainer's task lifecycle") tells how a job's
tasks are supervised. TensorFlow is not needed here.
"""

import collections
import contextlib
import ctypes
import dataclasses
import os
import queue
import signal
import subprocess
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_TAIL_LINES = 30


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task to run as a child process.

    Attributes:
        job_name: e.g. `"ps"` or `"worker"`.
        task_index: index of the task within its job.
        argv: the command line of the child.
        finishes: whether the job is done only once this task has exited 0 (workers);
            others (parameter servers) run until they exit by themselves or are stopped.
        env: `(name, value)` pairs added to this child's environment (e.g. TF_CONFIG).
    """

    job_name: str
    task_index: int
    argv: tuple
    finishes: bool = True
    env: tuple = ()

    @property
    def name(self):
        """E.g. `"worker 1"`."""
        return f"{self.job_name} {self.task_index}"


class TaskFailedError(RuntimeError):
    """A child process failed; carries the task, its exit code and its last lines.

    Attributes:
        task: the `TaskSpec` of the failed child.
        returncode: its exit code (negative: killed by that signal).
        tail: its last lines of output.
        log_path: the file with its whole output, or None.
    """

    def __init__(self, task, returncode, tail, log_path):
        self.task = task
        self.returncode = returncode
        self.tail = list(tail)
        self.log_path = log_path
        super().__init__(f"{task.name} {describe_exit(returncode)}")


class StallError(RuntimeError):
    """No child printed anything for longer than the stall timeout."""


def describe_exit(returncode):
    """Returns e.g. `"exited with code 1"` or `"was killed by signal SIGKILL"`."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by signal {name}"
    return f"exited with code {returncode}"


class Child:
    """One running task: its process, restart count, output tail and log file."""

    def __init__(self, task, env, log_dir, lines, hide_from_tail=None):
        self.task = task
        self.restarts = 0
        self.process = None
        self.returncode = None
        self.tail = collections.deque(maxlen=_TAIL_LINES)
        self.log_path = (
            os.path.join(log_dir, f"{task.job_name}_{task.task_index}.log") if log_dir else None
        )
        self._env = dict(os.environ if env is None else env, **dict(task.env))
        self._lines = lines
        self._hide_from_tail = hide_from_tail or (lambda line: False)
        self._reader = None

    @property
    def pid(self):
        """The process id of the current process, or None before the start."""
        return self.process.pid if self.process else None

    def start(self):
        """Starts (or restarts) the child process and the thread reading its output."""
        self.returncode = None
        self.process = subprocess.Popen(
            list(self.task.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self._env,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops children.
            # Only calls prctl, so safe between fork and exec (see make_die_with_parent).
            preexec_fn=make_die_with_parent(),  # noqa: PLW1509
            text=True,
            errors="replace",
            bufsize=1,
        )
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else None  # noqa: SIM115
        self._reader = threading.Thread(
            target=self._read, args=(self.process, log), name=f"read {self.task.name}", daemon=True
        )
        self._reader.start()

    def _read(self, process, log):
        """Copies each line of the child's output to the log, the tail and the queue."""
        try:
            for raw_line in process.stdout:
                line = raw_line.rstrip("\n")
                if log:
                    log.write(line + "\n")
                    log.flush()
                if not self._hide_from_tail(line):
                    self.tail.append(line)
                self._lines.put((self, line))
        finally:
            process.stdout.close()
            if log:
                log.close()

    def finish_reading(self, timeout_secs):
        """Waits (at most `timeout_secs`) until the output of an exited child is read."""
        if self._reader:
            self._reader.join(timeout_secs)

    def poll(self):
        """Returns the exit code once the process has exited, else None."""
        if self.process and self.returncode is None:
            self.returncode = self.process.poll()
        return self.returncode

    def signal(self, signum):
        """Sends `signum` to the child's process group, if it still runs."""
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)

    def wait(self, timeout_secs):
        """Waits at most `timeout_secs` for the process to exit; returns its code or None."""
        try:
            self.returncode = self.process.wait(timeout_secs)
        except subprocess.TimeoutExpired:
            return None
        return self.returncode


class LocalCluster:
    """Runs tasks as child processes on this machine and supervises them.

    A failed child is restarted in place while its `restarts` count is below
    `max_restarts`, unless its exit code is one of `final_codes`. Stopping sends SIGTERM to
    each child's process group, then SIGKILL after a grace period; a child also gets SIGKILL
    if the launcher dies (`make_die_with_parent`), so none outlives it.

    Use it as a context manager, so that every child is stopped on the way out: in the
    block, `cluster.start()`, then `cluster.supervise()` until every finishing task exited 0.

    Args:
        tasks: the `TaskSpec`s to run, started in this order.
        env: environment of the children (default: the launcher's).
        log_dir: directory for one log file per child, or None.
        on_line: called as `on_line(task, line)` for each line a child prints.
        on_start: called as `on_start(task, pid, restarts)` when a child (re)starts.
        max_restarts: how often a failed child is restarted before the job fails.
        final_codes: exit codes that fail the job at once, restarts left or not: the child
            found something a restart would find again (easgd-train's `EXIT_USAGE`).
        hide_from_tail: None, or `hide_from_tail(line)`, true for the lines left out of the
            last lines a failed child's error shows (they stay in its log file).
        stall_timeout_secs: the job fails if no child prints a line for this long (None:
            never).
        stop_grace_secs: time children get to exit after SIGTERM before SIGKILL.

    Raises:
        ValueError: if `max_restarts` is negative.
    """

    def __init__(
        self,
        tasks,
        *,
        env=None,
        log_dir=None,
        on_line=None,
        on_start=None,
        max_restarts=0,
        final_codes=(),
        hide_from_tail=None,
        stall_timeout_secs=None,
        stop_grace_secs=5.0,
    ):
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts!r}.")
        if log_dir:
            os.makedirs(log_dir, exist_ok=True)
        self._lines = queue.Queue()
        self.children = [Child(task, env, log_dir, self._lines, hide_from_tail) for task in tasks]
        self._on_line = on_line or (lambda task, line: None)
        self._on_start = on_start or (lambda task, pid, restarts: None)
        self._max_restarts = max_restarts
        self._final_codes = frozenset(final_codes)
        self._stall_timeout_secs = stall_timeout_secs
        self._stop_grace_secs = stop_grace_secs

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self, only=None):
        """Starts every child that does not run yet, or only those whose task name is listed.

        Args:
            only: names of the tasks to start (e.g. `["ps 0", "worker 1"]`), or None.
        """
        for child in self.children:
            if only is not None and child.task.name not in only:
                continue
            if child.process is not None and child.poll() is None:
                continue
            child.start()
            self._on_start(child.task, child.pid, child.restarts)

    def supervise(self, poll_secs=0.1):
        """Streams output and watches the children until every finishing task exited 0.

        Raises:
            TaskFailedError: when a child exits non-zero (after its restarts are used up).
            StallError: when no child printed a line for `stall_timeout_secs`.
        """
        last_line = time.monotonic()
        while True:
            if self._pump(poll_secs):
                last_line = time.monotonic()
            self._check_failures()
            finishing = [child for child in self.children if child.task.finishes]
            if all(child.poll() == 0 for child in finishing):
                for child in finishing:
                    child.finish_reading(timeout_secs=2.0)
                self._pump(0)
                return
            silent = time.monotonic() - last_line
            if self._stall_timeout_secs is not None and silent > self._stall_timeout_secs:
                raise StallError(
                    f"no task printed anything for {silent:.0f} s (stall timeout "
                    f"{self._stall_timeout_secs:g} s)"
                )

    def wait_for_line(self, predicate, timeout_secs, poll_secs=0.1):
        """Streams output until a child prints a line for which `predicate(task, line)` holds
        (`task` its `TaskSpec`), or until `timeout_secs`; `poll_secs` is the longest pause
        between two checks of the children.

        Returns:
            Whether such a line came before the deadline.

        Raises:
            TaskFailedError: when a child exits non-zero meanwhile.
        """
        deadline = time.monotonic() + timeout_secs
        while True:
            left = deadline - time.monotonic()
            lines = self._pump(min(poll_secs, max(left, 0)))
            if any(predicate(task, line) for task, line in lines):
                return True
            self._check_failures()
            if left <= 0:
                return False

    def _check_failures(self):
        """Restarts failed children while restarts are left; raises TaskFailedError after."""
        for child in self.children:
            code = child.poll()
            if code is None or code == 0:
                continue
            child.finish_reading(timeout_secs=2.0)
            self._pump(0)
            if child.restarts >= self._max_restarts or code in self._final_codes:
                raise TaskFailedError(child.task, code, child.tail, child.log_path)
            child.restarts += 1
            child.start()
            self._on_start(child.task, child.pid, child.restarts)

    def drop(self, name):
        """Stops supervising task `name`, which has exited: the job goes on without it.

        Its exit code no longer fails the job and it is not restarted (a worker given up
        for lost). `supervise()` then waits for the other finishing tasks only.

        Raises:
            ValueError: if no task is called `name`, or it is still running.
        """
        child = next((c for c in self.children if c.task.name == name), None)
        if child is None:
            raise ValueError(f"name must be the name of a task, got {name!r}.")
        if child.process is not None and child.poll() is None:
            raise ValueError(f"task {name!r} is still running; stop it before dropping it.")
        child.finish_reading(timeout_secs=2.0)
        self._pump(0)
        self.children.remove(child)

    def wait_for_servers(self, timeout_secs):
        """Waits at most `timeout_secs` for the non-finishing tasks to exit by themselves.

        Returns:
            Whether all of them exited.
        """
        deadline = time.monotonic() + timeout_secs
        for child in self.children:
            if not child.task.finishes:
                child.wait(max(deadline - time.monotonic(), 0))
        self._pump(0)
        return all(child.poll() is not None for child in self.children)

    def stop(self):
        """Stops every child still running: SIGTERM, then SIGKILL after the grace period."""
        running = [c for c in self.children if c.process and c.process.poll() is None]
        for child in running:
            child.signal(signal.SIGTERM)
        deadline = time.monotonic() + self._stop_grace_secs
        for child in running:
            if child.wait(max(deadline - time.monotonic(), 0)) is None:
                child.signal(signal.SIGKILL)
                child.wait(5.0)
        for child in self.children:
            child.finish_reading(timeout_secs=1.0)
        self._pump(0)

    def _pump(self, timeout_secs):
        """Hands queued output lines to `on_line`, waiting at most `timeout_secs` for one.

        Returns:
            The `(task, line)` pairs handed on.
        """
        handed = []
        try:
            item = self._lines.get(timeout=timeout_secs) if timeout_secs > 0 else None
            while True:
                if item is not None:
                    child, line = item
                    self._on_line(child.task, line)
                    handed.append((child.task, line))
                item = self._lines.get_nowait()
        except queue.Empty:
            return handed


def make_die_with_parent():
    """Returns a `preexec_fn` for `subprocess.Popen` that makes the child die with its parent.

    On Linux: `prctl(PR_SET_PDEATHSIG, SIGKILL)`, resolved here, the only call between fork
    and exec, so safe while other threads run. Elsewhere: None.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def sigterm_as_keyboard_interrupt():
    """Within the block, SIGTERM raises KeyboardInterrupt (so cleanup runs as on Ctrl-C)."""

    def handler(*_):
        raise KeyboardInterrupt("SIGTERM")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
