"""A worker's watch on its own training steps: it says when one waits too long, and why.

A cut link or a frozen task closes no connection: a step that needs it waits in gRPC until
it answers (docs/RELIABILITY.md, "Partitions"). `StallWatch`'s thread reports a step that
has waited `after_secs` ("stalled", naming the parameter servers that take no connection)
and its end ("resumed"). Given `rejoin` (easgd-train's `process.restart_this_process`), it
gives up ("rejoining") a step still waiting `rejoin_after_secs` after those parameter
servers took connections again, or `stuck_after_secs` on parameter servers that took them
all along (a lost call, a ps frozen that long).
"""

import contextlib
import threading
import time

from tf_contrib_easgd import wait_until_reachable
from tf_contrib_easgd.trainer.progress import Reporter

_POLL_SECS = 0.5
#: How long a stalled step may still wait once the parameter servers it could not reach
#: take connections again, before `rejoin`. TCP retransmits a lost segment after a backoff
#: that grows with the cut (11-12 s after a 15 s cut here, up to 2 min).
REJOIN_AFTER_SECS = 5.0
#: How long easgd-train's training steps may wait on parameter servers that take connections
#: before the worker rejoins: far beyond any of them (milliseconds) or a ledger write.
STUCK_AFTER_SECS = 60.0


def stuck_after_secs(timeout_secs):
    """Returns how long easgd-train's steps may be stuck: `STUCK_AFTER_SECS`, or half of
    `--timeout_secs` when shorter, so that a stuck step rejoins well before the session's
    operation timeout fails the process."""
    return min(STUCK_AFTER_SECS, timeout_secs / 2)


class StallWatch:
    """Reports a training step that has waited `after_secs`, then its end.

    Use `with watch.step(local_step): sess.run(...)` around each step, `close()` at the end.

    Args:
        reporter: the `progress.Reporter` of this worker.
        after_secs: how long a step may wait before it is reported, > 0.
        ps_hosts: the parameter servers' `host:port`, probed when a step is reported.
        poll_secs: how often the thread checks the step in progress.
        rejoin: None, or a function called (from the watch's thread) to give up a stalled
            step whose unreachable parameter servers take connections again.
        rejoin_after_secs: how long such a step may still wait before `rejoin`.
        stuck_after_secs: None, or how long a step may wait on parameter servers that took
            connections all along before `rejoin` (a lost call, or a long-frozen ps). It
            is checked once the step is reported, so `after_secs` when that is longer.
    """

    def __init__(
        self,
        reporter: Reporter,
        after_secs,
        ps_hosts,
        poll_secs=_POLL_SECS,
        rejoin=None,
        rejoin_after_secs=REJOIN_AFTER_SECS,
        stuck_after_secs=None,
    ):
        if not after_secs > 0:
            raise ValueError(f"after_secs={after_secs!r}: must be > 0.")
        self._reporter = reporter
        self._after_secs = after_secs
        self._ps_hosts = list(ps_hosts)
        self._poll_secs = poll_secs
        self._rejoin = rejoin
        self._rejoin_after_secs = rejoin_after_secs
        self._stuck_after_secs = stuck_after_secs
        self._lock = threading.Lock()
        self._started = None  # `time.monotonic()` when the step in progress started.
        self._local_step = 0
        self._reported = False  # The step in progress was reported as stalled.
        self._cut = False  # A probe during the stalled step found a ps unreachable.
        self._may_be_stuck = True  # The step in progress may be given up as stuck.
        self._back = None  # `time.monotonic()` since when every ps took connections again.
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall-watch", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def step(self, local_step, may_be_stuck=True):
        """A context manager around local step `local_step` (the steps taken before it).

        Args:
            local_step: the steps taken before it.
            may_be_stuck: False for work that may legitimately take long (an evaluation, a
                checkpoint): reported, but never given up under `stuck_after_secs`.
        """
        self._begin(local_step, may_be_stuck)
        try:
            yield
        finally:
            self._end()

    def close(self):
        """Stops the watching thread."""
        self._closed.set()
        self._thread.join(timeout=5 * self._poll_secs)

    def _begin(self, local_step, may_be_stuck):
        with self._lock:
            self._started, self._local_step, self._reported = time.monotonic(), local_step, False
            self._cut, self._back = False, None
            self._may_be_stuck = may_be_stuck

    def _end(self):
        with self._lock:
            started, reported = self._started, self._reported
            self._started, self._reported = None, False
        if reported:
            self._reporter.event("resumed", step=self._local_step, secs=time.monotonic() - started)

    def _watch(self):
        while not self._closed.wait(self._poll_secs):
            with self._lock:
                started, reported = self._started, self._reported
                due = (
                    started is not None
                    and not reported
                    and time.monotonic() - started >= self._after_secs
                )
                if due:
                    self._reported = True
            if due:
                unreachable = [host for host in self._ps_hosts if not _accepts(host)]
                self._cut = bool(unreachable)
                self._reporter.event(
                    "stalled",
                    step=self._local_step,
                    secs=time.monotonic() - started,
                    unreachable=unreachable,
                )
            elif started is not None and reported and self._rejoin is not None:
                self._check_link(started)

    def _check_link(self, started):
        """Probes the parameter servers during a reported step; calls `rejoin` when due."""
        if not all(_accepts(host) for host in self._ps_hosts):
            self._cut, self._back = True, None
            return
        now = time.monotonic()
        if self._cut:
            if self._back is None:
                self._back = now
            due = now - self._back >= self._rejoin_after_secs
        else:
            # A frozen ps takes connections all along, and its step goes on when it does;
            # only a step that has waited `stuck_after_secs` is given up.
            due = (
                self._stuck_after_secs is not None
                and self._may_be_stuck
                and now - started >= self._stuck_after_secs
            )
        if not due:
            return
        with self._lock:
            if self._started != started:
                return  # The step has ended meanwhile.
        back_secs = now - self._back if self._cut else None
        self._reporter.event(
            "rejoining", step=self._local_step, secs=now - started, back_secs=back_secs
        )
        self._closed.set()
        self._rejoin()


def _accepts(address):
    """Whether a TCP connection to `address` (`host:port`) succeeds now."""
    try:
        wait_until_reachable([address], timeout_secs=0)
    except TimeoutError:
        return False
    return True
