"""Unit tests (no server, no child process): session creation
(tf_contrib_easgd/job/sessions.py).

The tests of its other tiers are in tests/cluster/test_sessions.py.
"""

import pytest
import tensorflow as tf

import tf_contrib_easgd
from tf_contrib_easgd.job import sessions


def test_a_non_chief_waits_for_the_centre_before_every_session(monkeypatch):
    # Each session the creator makes (at start, and in each recovery of its monitored
    # session) comes after a wait for the centre, so the readiness check that
    # WorkerSessionCreator then makes succeeds at once instead of sleeping 30 s.
    calls = []
    monkeypatch.setattr(
        sessions, "_wait_until_empty", lambda *args: calls.append(("wait", args[0], args[3:]))
    )

    class Creator:
        def create_session(self):
            calls.append(("create",))
            return f"session {len(calls) // 2}"

    with tf.Graph().as_default():
        tf.compat.v1.get_variable("v", [1])
        creator = tf_contrib_easgd.CentreWaitingSessionCreator(
            master="grpc://w1", config="the config", max_wait_secs=7.0
        )
        creator._creator = Creator()
        assert [creator.create_session(), creator.create_session()] == ["session 1", "session 2"]
    wait = ("wait", "grpc://w1", ("the config", 7.0))
    assert calls == [wait, ("create",), wait, ("create",)]


def test_a_readiness_check_without_answer_is_retried_on_a_new_session(monkeypatch):
    # The first session's check gets no answer (a request lost on the way to the ps):
    # it is given up after POLL_DEADLINE_SECS, not the whole 60 s, and the second
    # check, on a new session, finds nothing uninitialised.
    opened = []

    class Session:
        def __init__(self, master, graph, config):
            self.closed = False
            self.timeouts = []
            opened.append(self)

        def run(self, fetches, options):
            self.timeouts.append(options.timeout_in_ms)
            if len(opened) == 1:
                raise tf.errors.DeadlineExceededError(None, None, "no answer")
            return []

        def close(self):
            self.closed = True

    monkeypatch.setattr(tf.compat.v1, "Session", Session)
    monkeypatch.setattr(sessions, "POLL_SECS", 0.0)
    sessions._wait_until_empty("grpc://w1", None, "ready", None, timeout_secs=60.0)
    assert len(opened) == 2 and all(session.closed for session in opened)
    assert opened[0].timeouts == [sessions.POLL_DEADLINE_SECS * 1000]
    assert len(opened[1].timeouts) == 1


def test_centre_readiness_tensor_is_made_once_per_graph():
    with tf.Graph().as_default() as graph:
        tf.compat.v1.get_variable("v", [1])
        first = tf_contrib_easgd.centre_readiness_tensor()
        assert tf_contrib_easgd.centre_readiness_tensor(graph) is first
    with tf.Graph().as_default() as other:
        tf.compat.v1.get_variable("v", [1])
        other.finalize()
        with pytest.raises(RuntimeError, match="The graph is finalized"):
            tf_contrib_easgd.centre_readiness_tensor()


def test_monitored_training_session_rejects_what_tensorflows_does_not_take():
    with pytest.raises(TypeError, match="save_every"):
        tf_contrib_easgd.MonitoredTrainingSession(is_chief=False, save_every=10)


def test_a_timeout_names_what_the_last_answered_check_found(monkeypatch):
    # The checks answer "v" is uninitialised until the last one, which the deadline leaves
    # too little time to answer: the error names "v", not the unanswered check.
    answers = iter([[b"v"], [b"v"]])

    class Session:
        def __init__(self, master, graph, config):
            pass

        def run(self, fetches, options):
            answer = next(answers, None)
            if answer is None:
                raise tf.errors.DeadlineExceededError(None, None, "no answer")
            return answer

        def close(self):
            pass

    clock = iter([0.0, 0.0, 0.1, 0.2, 0.3, 1.0, 2.0, 3.0])
    monkeypatch.setattr(tf.compat.v1, "Session", Session)
    monkeypatch.setattr(sessions, "POLL_SECS", 0.0)
    monkeypatch.setattr(sessions.time, "monotonic", lambda: next(clock))
    with pytest.raises(TimeoutError, match=r"within 0.5 s; still uninitialised: \['v'\]"):
        sessions._wait_until_empty("grpc://w1", None, "ready", None, timeout_secs=0.5)
