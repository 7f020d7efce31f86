"""Tests of tf_contrib_easgd.trainer.stall: a step that waits too long is reported, then its end.

Real time, short: the watch polls every 20 ms and reports a step after 0.2 s. The job-level
behaviour (a cut link, a frozen ps) is in tests/test_multihost.py and tests/test_faults.py.
"""

import socket
import time

import pytest

from tf_contrib_easgd.trainer import progress, stall

AFTER_SECS = 0.2
POLL_SECS = 0.02


class _Reporter:
    """Collects the events a `StallWatch` reports."""

    def __init__(self):
        self.events = []

    def event(self, kind, **fields):
        self.events.append({"event": kind, **fields})


def _closed_address():
    """A loopback `host:port` where nothing listens (a port the kernel just gave back)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def listening():
    """A loopback `host:port` that accepts connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _watch(reporter, ps_hosts):
    return stall.StallWatch(reporter, AFTER_SECS, ps_hosts, poll_secs=POLL_SECS)


def test_a_quick_step_is_not_reported(listening):
    reporter = _Reporter()
    watch = _watch(reporter, [listening])
    try:
        for step in range(5):
            with watch.step(step):
                time.sleep(0.01)  # 10 ms, far below the 200 ms of AFTER_SECS.
        time.sleep(3 * POLL_SECS)
    finally:
        watch.close()
    assert reporter.events == []


def test_a_long_step_is_reported_once_then_its_end(listening):
    closed = _closed_address()
    reporter = _Reporter()
    watch = _watch(reporter, [listening, closed])
    try:
        with watch.step(42):
            time.sleep(0.6)  # Three times AFTER_SECS: one report all the same.
        with watch.step(43):
            pass
    finally:
        watch.close()
    stalled, resumed = reporter.events
    assert stalled["event"] == "stalled" and stalled["step"] == 42
    # Reported after AFTER_SECS, within a poll (and the probes) of it.
    assert AFTER_SECS <= stalled["secs"] < 0.5
    # The listening address accepts connections, the closed one does not.
    assert stalled["unreachable"] == [closed]
    assert resumed["event"] == "resumed" and resumed["step"] == 42
    assert 0.6 <= resumed["secs"] < 1.0


def test_each_long_step_is_reported(listening):
    reporter = _Reporter()
    watch = _watch(reporter, [listening])
    try:
        for step in (7, 8):
            with watch.step(step):
                time.sleep(0.4)
    finally:
        watch.close()
    kinds = [(e["event"], e["step"]) for e in reporter.events]
    assert kinds == [("stalled", 7), ("resumed", 7), ("stalled", 8), ("resumed", 8)]


@pytest.mark.parametrize("after_secs", [0, -1.0, float("nan")])
def test_after_secs_must_be_positive(after_secs):
    with pytest.raises(ValueError, match=r"after_secs=.*must be > 0"):
        stall.StallWatch(_Reporter(), after_secs, [])


def test_the_events_read_as_text():
    cut = {"event": "stalled", "task": "worker 1", "step": 230, "secs": 30.4}
    text = progress.format_event({**cut, "unreachable": ["10.0.0.1:2222"]})
    assert text == (
        "worker 1: local step 230 has waited 30 s for the parameter servers (no connection "
        "to 10.0.0.1:2222: a cut link?); it goes on when they answer"
    )
    frozen = progress.format_event({**cut, "unreachable": []})
    assert "they take connections but do not answer: a frozen or overloaded process?" in frozen
    resumed = {"event": "resumed", "task": "worker 1", "step": 230, "secs": 41.25}
    assert progress.format_event(resumed) == "worker 1: local step 230 went on after 41.2 s"
