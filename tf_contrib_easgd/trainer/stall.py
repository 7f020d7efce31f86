"""A worker's watch on its own training steps: it says when one waits too long, and why.

A task whose link is cut, or whose process is frozen, closes no connection: a step that
needs it waits in gRPC, without an error, until the task answers again, and then goes on
(docs/RELIABILITY.md, "Partitions"). `StallWatch` makes that wait visible: a thread checks
the step in progress and, once it has waited `after_secs`, reports a "stalled" event that
says which parameter servers still accept connections; when the step ends, "resumed".
"""

import threading
import time

from tf_contrib_easgd import wait_until_reachable
from tf_contrib_easgd.trainer.progress import Reporter

_POLL_SECS = 0.5


class StallWatch:
    """Reports a training step that has waited `after_secs`, then its end.

    Use `with watch.step(local_step): sess.run(...)` around each step, `close()` at the end.

    Args:
        reporter: the `progress.Reporter` of this worker.
        after_secs: how long a step may wait before it is reported, > 0.
        ps_hosts: the parameter servers' `host:port`, probed when a step is reported.
        poll_secs: how often the thread checks the step in progress.
    """

    def __init__(self, reporter: Reporter, after_secs, ps_hosts, poll_secs=_POLL_SECS):
        if not after_secs > 0:
            raise ValueError(f"after_secs={after_secs!r}: must be > 0.")
        self._reporter = reporter
        self._after_secs = after_secs
        self._ps_hosts = list(ps_hosts)
        self._poll_secs = poll_secs
        self._lock = threading.Lock()
        self._started = None  # `time.monotonic()` when the step in progress started.
        self._local_step = 0
        self._reported = False  # The step in progress was reported as stalled.
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self._thread.start()

    def step(self, local_step):
        """A context manager around local step `local_step` (the steps taken before it)."""
        return _Step(self, local_step)

    def close(self):
        """Stops the watching thread."""
        self._closed.set()
        self._thread.join(timeout=5 * self._poll_secs)

    def _begin(self, local_step):
        with self._lock:
            self._started, self._local_step, self._reported = time.monotonic(), local_step, False

    def _end(self):
        with self._lock:
            started, reported = self._started, self._reported
            self._started, self._reported = None, False
        if reported:
            self._reporter.event("resumed", step=self._local_step, secs=time.monotonic() - started)

    def _watch(self):
        while not self._closed.wait(self._poll_secs):
            with self._lock:
                started = self._started
                due = (
                    started is not None
                    and not self._reported
                    and time.monotonic() - started >= self._after_secs
                )
                if due:
                    self._reported = True
            if due:
                self._reporter.event(
                    "stalled",
                    step=self._local_step,
                    secs=time.monotonic() - started,
                    unreachable=[host for host in self._ps_hosts if not _accepts(host)],
                )


class _Step:
    def __init__(self, watch, local_step):
        self._watch = watch
        self._local_step = local_step

    def __enter__(self):
        self._watch._begin(self._local_step)  # noqa: SLF001 - the watch's own helper.
        return self

    def __exit__(self, *exc_info):
        self._watch._end()  # noqa: SLF001 - as above.


def _accepts(address):
    """Whether a TCP connection to `address` (`host:port`) succeeds now."""
    try:
        wait_until_reachable([address], timeout_secs=0)
    except TimeoutError:
        return False
    return True
