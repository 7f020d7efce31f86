"""Tests of tf_contrib_easgd.trainer.stall: a step that waits too long is reported, then its end.

Real time, short: the watch polls every 20 ms and reports a step after 0.2 s. The job-level
behaviour (a cut link, a frozen ps) is in tests/e2e/test_multihost.py and tests/e2e/test_faults.py.
"""

import socket
import time

import pytest

from tf_contrib_easgd.trainer import progress, stall

AFTER_SECS = 0.2
POLL_SECS = 0.02
STUCK_AFTER_SECS = 0.5  # A step stuck this long on reachable parameter servers rejoins.


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


REJOIN_AFTER_SECS = 0.2


class _Link:
    """Stands in for `stall._accepts`: no connection while `cut`, then connections again."""

    def __init__(self):
        self.cut = False

    def accepts(self, address):
        del address  # Every ps is behind the same link.
        return not self.cut


def _rejoining_watch(reporter, link, monkeypatch, rejoins):
    monkeypatch.setattr(stall, "_accepts", link.accepts)
    return stall.StallWatch(
        reporter,
        AFTER_SECS,
        ["10.0.0.1:2222"],
        poll_secs=POLL_SECS,
        rejoin=lambda: rejoins.append(time.monotonic()),
        rejoin_after_secs=REJOIN_AFTER_SECS,
    )


def test_a_step_still_stuck_after_the_link_is_back_rejoins(monkeypatch):
    reporter, link, rejoins = _Reporter(), _Link(), []
    watch = _rejoining_watch(reporter, link, monkeypatch, rejoins)
    try:
        link.cut = True
        with watch.step(5):
            time.sleep(0.4)  # Reported at 0.2 s, the ps unreachable.
            link.cut = False
            back = time.monotonic()
            time.sleep(0.5)  # Still waiting REJOIN_AFTER_SECS (0.2 s) later: rejoin.
    finally:
        watch.close()
    stalled, rejoining, _ = reporter.events
    assert stalled["event"] == "stalled" and stalled["unreachable"] == ["10.0.0.1:2222"]
    assert rejoining["event"] == "rejoining" and rejoining["step"] == 5
    # The link came back at 0.4 s; a poll (20 ms) sees it, REJOIN_AFTER_SECS later another
    # poll calls `rejoin`, once.
    assert REJOIN_AFTER_SECS <= rejoining["back_secs"] < REJOIN_AFTER_SECS + 0.1
    assert len(rejoins) == 1
    assert REJOIN_AFTER_SECS <= rejoins[0] - back < REJOIN_AFTER_SECS + 0.15


def test_a_step_that_goes_on_once_the_link_is_back_stays(monkeypatch):
    reporter, link, rejoins = _Reporter(), _Link(), []
    watch = _rejoining_watch(reporter, link, monkeypatch, rejoins)
    try:
        link.cut = True
        with watch.step(5):
            time.sleep(0.4)
            link.cut = False
            time.sleep(0.1)  # Goes on within REJOIN_AFTER_SECS of the link coming back.
        time.sleep(0.3)
    finally:
        watch.close()
    assert [e["event"] for e in reporter.events] == ["stalled", "resumed"]
    assert rejoins == []


def test_a_step_on_a_frozen_ps_waits_without_rejoining(monkeypatch):
    # The ps takes connections all along (a frozen process): its step goes on by itself.
    reporter, link, rejoins = _Reporter(), _Link(), []
    watch = _rejoining_watch(reporter, link, monkeypatch, rejoins)
    try:
        with watch.step(9):
            time.sleep(0.8)
    finally:
        watch.close()
    assert [e["event"] for e in reporter.events] == ["stalled", "resumed"]
    assert reporter.events[0]["unreachable"] == []
    assert rejoins == []


def _stuck_watch(reporter, link, monkeypatch, rejoins):
    monkeypatch.setattr(stall, "_accepts", link.accepts)
    return stall.StallWatch(
        reporter,
        AFTER_SECS,
        ["10.0.0.1:2222"],
        poll_secs=POLL_SECS,
        rejoin=lambda: rejoins.append(time.monotonic()),
        stuck_after_secs=STUCK_AFTER_SECS,
    )


def test_a_step_stuck_on_a_ps_that_takes_connections_rejoins_after_stuck_after_secs(
    monkeypatch,
):
    # The ps takes connections all along, but the step never ends (a call lost on a ps that
    # serves the other workers): given up once it has waited STUCK_AFTER_SECS.
    reporter, link, rejoins = _Reporter(), _Link(), []
    watch = _stuck_watch(reporter, link, monkeypatch, rejoins)
    try:
        started = time.monotonic()
        with watch.step(7):
            time.sleep(1.2)
    finally:
        watch.close()
    stalled, rejoining, _ = reporter.events
    assert stalled["event"] == "stalled" and stalled["unreachable"] == []
    assert rejoining["event"] == "rejoining" and rejoining["back_secs"] is None
    # Polled every 20 ms: a poll at or after 0.5 s calls `rejoin`, once (the margin above
    # it is for a loaded machine).
    assert STUCK_AFTER_SECS <= rejoining["secs"] < STUCK_AFTER_SECS + 0.5
    assert len(rejoins) == 1 and STUCK_AFTER_SECS <= rejoins[0] - started < 1.2


def test_a_long_evaluation_or_save_is_never_given_up_as_stuck(monkeypatch):
    reporter, link, rejoins = _Reporter(), _Link(), []
    watch = _stuck_watch(reporter, link, monkeypatch, rejoins)
    try:
        with watch.step(7, may_be_stuck=False):
            time.sleep(2 * STUCK_AFTER_SECS)
    finally:
        watch.close()
    assert [e["event"] for e in reporter.events] == ["stalled", "resumed"]
    assert rejoins == []


def test_rejoining_reads_as_text():
    event = {"event": "rejoining", "task": "worker 1", "step": 230, "secs": 27.5, "back_secs": 5.2}
    assert progress.format_event(event) == (
        "worker 1: local step 230 still waits 5.2 s after the parameter servers took "
        "connections again (27.5 s in all); restarting this process to rejoin from the centre"
    )
    stuck = dict(event, back_secs=None, secs=60.1)
    assert progress.format_event(stuck) == (
        "worker 1: local step 230 has waited 60.1 s on parameter servers that take "
        "connections; restarting this process to rejoin from the centre"
    )


@pytest.mark.parametrize(
    "timeout_secs, expected",
    [
        (300.0, 60.0),  # easgd-train's default --timeout_secs: STUCK_AFTER_SECS, 60 s.
        (120.0, 60.0),  # Half of it is exactly 60 s.
        (30.0, 15.0),  # Half of 30 s, so the step rejoins before the session times out.
        (1.0, 0.5),  # --timeout_secs's lower bound.
    ],
)
def test_stuck_after_secs_is_60_s_or_half_the_timeout(timeout_secs, expected):
    assert stall.stuck_after_secs(timeout_secs) == expected
