"""This easgd-train process: when its run started, and a new run of it in its place.

A worker that gives up a step stalled on a partition re-executes its own command line
(`restart_this_process`, passed to `stall.StallWatch`): same pid, so the start time the
kernel gives (psutil) stays the first run's. The new run learns its own start from the environment
(`RESTARTED_AT_ENV`), so that its timings, such as a session's start-up time, count from
it. No TensorFlow here.
"""

import math
import os
import sys
import time

import psutil

#: `time.monotonic()` at a re-execution, set by `restart_this_process` for the new run
#: (Linux's monotonic clock is the same for every process and survives `execve`).
RESTARTED_AT_ENV = "EASGD_TRAIN_RESTARTED_AT"


def started_at():
    """Returns the `time.monotonic()` value at which this run of the process started.

    After `restart_this_process`, the time of the re-execution (read once: the variable is
    taken out of the environment). Otherwise the process's start as psutil reads it, so
    that wall times include interpreter start-up and the TensorFlow import; if unknown, the
    time of the call.
    """
    try:
        restarted_at = float(os.environ.pop(RESTARTED_AT_ENV, "nan"))
    except ValueError:
        restarted_at = math.nan
    if math.isfinite(restarted_at):
        return min(restarted_at, time.monotonic())
    try:
        age = _age_secs()
    except psutil.Error:
        age = 0.0
    return time.monotonic() - max(age, 0.0)


def _age_secs():
    """Seconds since this process started. psutil's start time is the kernel's ticks after
    boot plus the wall-clock time of the boot, rounded to a second and off by the clock's
    adjustments since; against the clock of seconds since boot, only the ticks count."""
    created = psutil.Process().create_time()
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME) - (created - psutil.boot_time())
    return time.time() - created


def restart_this_process():
    """Replaces this process by a new run of its own command line: same pid, same output.

    Every thread, and with them the calls waiting in gRPC, ends; the sockets, which gRPC
    opens close-on-exec, are closed; the new run starts as a restarted task does, and
    `started_at()` there returns the time of this call.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    environment = dict(os.environ, **{RESTARTED_AT_ENV: repr(time.monotonic())})
    os.execve(sys.executable, sys.orig_argv, environment)
