"""ExchangeSender: an eager worker's overlapped exchanges, one in flight, every wait bounded.

No TensorFlow and no server: the exchanges are Python functions, some of which block on an
event until the test lets them go (each such wait has its own deadline, so nothing hangs if
a check fails first). The worker's use of it: tests/unit/test_eager_worker.py.
"""

import threading

import pytest

from tf_contrib_easgd.eager.sender import ExchangeSender

DEADLINE_SECS = 30  # Of every wait for an exchange that ends by itself.


def _blocked(release):
    """An exchange that ends when `release` is set (at most DEADLINE_SECS): its values."""

    def exchange(values):
        release.wait(DEADLINE_SECS)
        return values

    return exchange


def _failing(values):
    raise ValueError(f"the ps refused {values}")


def test_an_exchange_lands_once_with_its_result():
    sender = ExchangeSender(DEADLINE_SECS)
    assert sender.land() is None  # Nothing in flight: nothing to wait for.
    sender.send(lambda values: [2 * v for v in values], [1, 2])
    assert sender.in_flight is not None
    assert sender.land() == [2, 4]
    assert (sender.in_flight, sender.land()) == (None, None)  # Taken off.
    sender.close()


def test_an_exchanges_error_is_raised_when_it_lands_then_it_is_gone():
    sender = ExchangeSender(DEADLINE_SECS)
    sender.send(_failing, [7])
    with pytest.raises(ValueError, match=r"the ps refused \[7\]"):
        sender.land()
    assert sender.land() is None
    sender.close()


def test_a_second_send_before_landing_is_refused():
    sender = ExchangeSender(DEADLINE_SECS, "worker 1")
    release = threading.Event()
    try:
        sender.send(_blocked(release), [1])
        with pytest.raises(RuntimeError, match="worker 1 sends an exchange while the last one"):
            sender.send(_blocked(release), [2])
    finally:
        release.set()
    assert sender.land() == [1]  # The first one, untouched.
    sender.close()


@pytest.mark.parametrize("wait", ["land", "discard", "close"])
def test_an_exchange_that_does_not_end_in_time_is_a_clear_timeout_error(wait):
    # The exchange ends only when released, after the sender's deadline of 0.2 s has run
    # out, however fast the machine: each wait raises, names the worker and the deadline,
    # and drops the exchange; the next one gets a thread of its own and lands.
    sender = ExchangeSender(0.2, "worker 3")
    release = threading.Event()
    try:
        sender.send(_blocked(release), ["late"])
        with pytest.raises(TimeoutError, match=r"worker 3 waited 0.2 s \(timeout_secs\) for its "):
            getattr(sender, wait)()
        assert sender.in_flight is None
        sender.send(lambda values: values, ["next"])
        assert sender.land() == ["next"]
    finally:
        release.set()
    sender.close()


@pytest.mark.parametrize("exchange", [_failing, lambda values: values], ids=["error", "result"])
def test_discard_waits_for_the_exchange_and_drops_it(exchange):
    # The exchange is released only after discard() has begun to wait (a second thread sets
    # the event once the first has entered the exchange): discard returns after it ended.
    sender = ExchangeSender(DEADLINE_SECS)
    entered, release, ended = threading.Event(), threading.Event(), []

    def slow(values):
        entered.set()
        release.wait(DEADLINE_SECS)
        ended.append(True)
        return exchange(values)

    sender.send(slow, [5])
    assert entered.wait(DEADLINE_SECS)
    releaser = threading.Timer(0.05, release.set)
    releaser.start()
    try:
        sender.discard()  # Neither the result nor the error comes out.
    finally:
        release.set()
        releaser.join(DEADLINE_SECS)
    assert ended == [True]  # It had ended when discard returned.
    assert sender.land() is None
    sender.close()


def test_close_drops_the_exchange_and_a_later_send_starts_a_new_thread():
    sender = ExchangeSender(DEADLINE_SECS)
    sender.send(lambda values: values, [1])
    sender.close()
    assert sender.land() is None  # Dropped, not landed later.
    sender.send(lambda values: values, [2])
    assert sender.land() == [2]
    sender.close()
