"""Recovery from a lost task: which errors a worker survives, and the loop that survives them.

A worker's training loop goes on after a parameter server or the chief is restarted by
creating its session again once the servers answer. `train_with_recovery` is that loop;
`is_recoverable_error` and `wait_until_reachable` are its parts, for loops of one's own.
docs/DESIGN.md ("Recovery") lists each fault and what it costs.
"""

import socket
import time

import tensorflow as tf

#: How long a recovering worker waits for the parameter servers, by default.
DEFAULT_TIMEOUT_SECS = 600.0

#: What TensorFlow's executor writes into the `InternalError` it raises instead of the
#: `UnavailableError` of a non-communication op (a `RemoteCall` is one).
_REWRITTEN_UNAVAILABLE = "originally returned UnavailableError"
_UNINITIALISED = ("uninitialized", "uninitialised", "not initialized")
#: How TensorFlow names, in the `CancelledError` of a step, another task's error that ended
#: it: the worker's own part of the step is cancelled and its error class is the one raised.
_ENDED_BY_ANOTHER_TASK = ("ABORTED: From /job:", "UNAVAILABLE: From /job:")


def is_recoverable_error(error):
    """Whether `error` means a task was lost, so a new session may go on once it is back.

    - `tf.errors.AbortedError` and `tf.errors.UnavailableError`: a task went away or was
      restarted (`MonitoredTrainingSession` recovers from these two by itself).
    - An `InternalError` that "originally returned UnavailableError": an exchange calls its
      parameter server in a function, and TensorFlow's executor rewrites the
      `UnavailableError` of such an op into an `InternalError`, which no session recovers
      from.
    - A `FailedPreconditionError` about an uninitialised variable: a parameter server was
      restarted and is still empty (the chief has not restored the centre into it yet).
    - A `CancelledError` of a step that another task ended with one of the first two: the
      worker's part of the step is cancelled, and TensorFlow raises that class, not the
      other task's (seen under load: a parameter server's `AbortedError` "The same
      RunGraph (Worker) request was received twice", a retried call).

    Args:
        error: an exception.

    Returns:
        True for those errors, False for any other.
    """
    if isinstance(error, (tf.errors.AbortedError, tf.errors.UnavailableError)):
        return True
    if isinstance(error, tf.errors.InternalError):
        return _REWRITTEN_UNAVAILABLE in str(error)
    if isinstance(error, tf.errors.FailedPreconditionError):
        message = str(error).lower()
        return any(words in message for words in _UNINITIALISED)
    if isinstance(error, tf.errors.CancelledError):
        return any(cause in str(error) for cause in _ENDED_BY_ANOTHER_TASK)
    return False


def train_with_recovery(
    train_fn, ps_hosts, timeout_secs=DEFAULT_TIMEOUT_SECS, on_recovery=None, max_recoveries=None
):
    """Calls `train_fn()` until it returns; after a lost task, waits and calls it again.

    `train_fn` creates its session (e.g. `tf_contrib_easgd.MonitoredTrainingSession`),
    trains and closes it; it keeps its own count of local steps across calls, so that a new
    session goes on where the last one stopped. When it raises an error that
    `is_recoverable_error` accepts, this waits until every parameter server accepts
    connections again and calls it once more: the chief's new session restores the centre
    if a parameter server lost it, and each worker's starts from the centre.

    Args:
        train_fn: a function of no arguments.
        ps_hosts: the parameter servers' `host:port` addresses.
        timeout_secs: how long to wait for the parameter servers after each loss.
        on_recovery: if given, called as `on_recovery(error, recoveries)` before waiting,
            `recoveries` counting from 1.
        max_recoveries: if given, the error after that many recoveries is raised.

    Returns:
        What `train_fn` returns.

    Raises:
        TimeoutError: if the parameter servers do not come back within `timeout_secs`.
        Exception: any error of `train_fn` that is not recoverable.
    """
    recoveries = 0
    while True:
        try:
            return train_fn()
        except Exception as error:
            if not is_recoverable_error(error):
                raise
            if max_recoveries is not None and recoveries >= max_recoveries:
                raise
            recoveries += 1
            tf.compat.v1.logging.warning(
                "Lost a task (%s: %s); waiting for the parameter servers, then starting "
                "a new session (recovery %d).",
                type(error).__name__,
                first_line(error),
                recoveries,
            )
            if on_recovery is not None:
                on_recovery(error, recoveries)
            wait_until_reachable(ps_hosts, timeout_secs)


def wait_until_reachable(addresses, timeout_secs, poll_secs=0.1):
    """Waits until a TCP connection to each `host:port` succeeds.

    A gRPC channel that first tried to connect before its server was listening backs off
    for seconds before it tries again; probing with plain sockets first lets a task start
    as soon as the servers it needs are up.

    Args:
        addresses: `host:port` strings.
        timeout_secs: the deadline, in seconds from now.
        poll_secs: pause between two rounds of attempts.

    Raises:
        TimeoutError: naming the addresses still unreachable at the deadline.
    """
    deadline = time.monotonic() + timeout_secs
    pending = list(addresses)
    while True:
        pending = [address for address in pending if not _accepts(address)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{pending} still not reachable after {timeout_secs:g} s; check that the "
                "tasks there run and that the host:port addresses are right."
            )
        time.sleep(poll_secs)


def first_line(error):
    """The first line of an error's message."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ""


def _accepts(address):
    """Whether a TCP connection to `address` (`host:port`) succeeds within a second."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
            return True
    except OSError:
        return False
