"""The recovery pieces (tf_contrib_easgd/job/recovery.py): which errors, and the loop."""

import socket
import threading
import time

import portpicker
import pytest
import tensorflow as tf

import tf_contrib_easgd
from tf_contrib_easgd.job import recovery


@pytest.mark.parametrize(
    ("error", "recoverable"),
    [
        (tf.errors.AbortedError(None, None, "graph handle not found"), True),
        (tf.errors.UnavailableError(None, None, "connection reset"), True),
        # What a RemoteCall raises when its parameter server is gone (TF 2.15 and 2.21):
        (
            tf.errors.InternalError(
                None,
                None,
                "From /job:worker/replica:0/task:1:\nrecvmsg:Connection reset by peer\n"
                "Executing non-communication op <exchange_with_ps_0> originally returned "
                "UnavailableError, and was replaced by InternalError to avoid invoking TF "
                "network error handling logic.",
            ),
            True,
        ),
        # A step ended by a parameter server's abort: the worker's part is cancelled, and
        # the class raised is the worker's (a soak with two ps, TF 2.21, under load).
        (
            tf.errors.CancelledError(
                None,
                None,
                "Graph execution error:\n\n=====================\nCANCELLED: From "
                "/job:worker/replica:0/task:1:\nRecvFromRemoteAsync is cancelled.\n\t "
                "[[{{node elastic_distance_terms/sub/ReadVariableOp_S99}}]]\nABORTED: From "
                "/job:ps/replica:0/task:0:\nThe same RunGraph (Worker) request was received "
                "twice.\n=====================",
            ),
            True,
        ),
        (
            tf.errors.CancelledError(
                None,
                None,
                "CANCELLED: From /job:worker/replica:0/task:0:\nUNAVAILABLE: From "
                "/job:ps/replica:0/task:1:\nConnection reset by peer",
            ),
            True,
        ),
        # A session closed or a run cancelled here, with no other task's error: not a loss.
        (tf.errors.CancelledError(None, None, "Session has been closed."), False),
        (tf.errors.CancelledError(None, None, "RecvFromRemoteAsync is cancelled."), False),
        (tf.errors.InternalError(None, None, "a bug"), False),
        (tf.errors.FailedPreconditionError(None, None, "the table is not ready"), False),
        (tf.errors.DeadlineExceededError(None, None, "timed out"), False),
        (ValueError("bad"), False),
    ],
)
def test_is_recoverable_error(error, recoverable):
    assert tf_contrib_easgd.is_recoverable_error(error) is recoverable


def test_reading_an_uninitialised_variable_is_recoverable(world):
    # What a worker meets when its parameter server was restarted and is still empty: the
    # error TensorFlow raises for a read of a variable nobody initialised, in each world.
    with tf.Graph().as_default() as graph:
        variable = tf.compat.v1.get_variable("centre", [2])
        read = variable.read_value() if world == "tf2" else tf.identity(variable)
    with (
        tf.compat.v1.Session(graph=graph) as session,
        pytest.raises(tf.errors.FailedPreconditionError) as raised,
    ):
        session.run(read)
    assert tf_contrib_easgd.is_recoverable_error(raised.value)


def _listening_address():
    """A `host:port` where a socket listens; the caller closes the returned socket."""
    listener = socket.socket()
    listener.bind(("localhost", portpicker.pick_unused_port()))
    listener.listen()
    return listener, f"localhost:{listener.getsockname()[1]}"


def test_train_with_recovery_calls_again_after_a_lost_task():
    listener, address = _listening_address()
    calls, recoveries = [], []

    def train():
        calls.append(len(calls))
        if len(calls) < 3:
            raise tf.errors.UnavailableError(None, None, f"lost ps, call {len(calls)}")
        return "trained"

    try:
        result = tf_contrib_easgd.train_with_recovery(
            train,
            [address],
            timeout_secs=10,
            on_recovery=lambda error, count: recoveries.append((str(error), count)),
        )
    finally:
        listener.close()
    # Two losses, so three calls; each recovery is counted from 1 and sees its error.
    assert result == "trained"
    assert calls == [0, 1, 2]
    assert recoveries == [("lost ps, call 1", 1), ("lost ps, call 2", 2)]


def test_train_with_recovery_raises_other_errors_at_once():
    calls = []

    def train():
        calls.append(1)
        raise ValueError("a bug in the model")

    with pytest.raises(ValueError, match="a bug in the model"):
        tf_contrib_easgd.train_with_recovery(train, ["localhost:1"], timeout_secs=0.1)
    assert calls == [1]


def test_train_with_recovery_stops_after_max_recoveries():
    listener, address = _listening_address()

    def train():
        raise tf.errors.AbortedError(None, None, "lost again")

    try:
        with pytest.raises(tf.errors.AbortedError, match="lost again"):
            tf_contrib_easgd.train_with_recovery(train, [address], max_recoveries=2)
    finally:
        listener.close()


def test_train_with_recovery_gives_up_when_the_ps_stays_away():
    address = f"localhost:{portpicker.pick_unused_port()}"  # Nothing listens there.

    def train():
        raise tf.errors.UnavailableError(None, None, "ps gone")

    with pytest.raises(TimeoutError, match=address):
        tf_contrib_easgd.train_with_recovery(train, [address], timeout_secs=0.3)


def test_wait_until_reachable_returns_once_a_server_listens():
    port = portpicker.pick_unused_port()
    listener = socket.socket()

    def listen_later():
        time.sleep(0.3)
        listener.bind(("localhost", port))
        listener.listen()

    thread = threading.Thread(target=listen_later)
    thread.start()
    try:
        started = time.monotonic()
        recovery.wait_until_reachable([f"localhost:{port}"], timeout_secs=10, poll_secs=0.05)
        assert time.monotonic() - started < 5  # It returns soon after the 0.3 s delay.
    finally:
        thread.join(5)
        listener.close()


def test_wait_until_reachable_times_out_naming_the_address():
    address = f"localhost:{portpicker.pick_unused_port()}"  # Nothing listens there.
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"\['{address}'\] still not reachable after 0.3 s"):
        recovery.wait_until_reachable([address], timeout_secs=0.3, poll_secs=0.05)
    assert time.monotonic() - started < 5
