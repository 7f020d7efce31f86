"""The overlapped exchanges of an eager worker (`overlap=True`): one in flight at most.

`ExchangeSender` runs each exchange on a thread of its own while the worker trains on, and
hands its result back when the worker lands it, at its next exchange or at `end()`. Every
wait for the exchange in flight has the worker's deadline; an exchange the worker starts
again from the centre without (a recovery, `close()`, a new `start()`) is waited for and
dropped, so that its d never lands on a fresh copy of the centre.
"""

import concurrent.futures


class ExchangeSender:
    """Sends a worker's exchanges on a thread of their own and lands them, one at a time."""

    def __init__(self, timeout_secs, name="worker"):
        """Starts no thread yet: the first `send` does.

        Args:
            timeout_secs: the deadline of every wait for the exchange in flight.
            name: the worker's name, for the errors.
        """
        self._timeout = timeout_secs
        self._name = name
        self._thread = None  # A ThreadPoolExecutor of one thread.
        self._in_flight = None  # The future of the exchange sent and not landed yet.

    @property
    def in_flight(self):
        """The `concurrent.futures.Future` of the exchange in flight, or None."""
        return self._in_flight

    def send(self, exchange, values):
        """Starts `exchange(values)` on the sender's thread and returns at once.

        Raises:
            RuntimeError: if an exchange is in flight still: land or discard it first.
        """
        if self._in_flight is not None:
            raise RuntimeError(
                f"{self._name} sends an exchange while the last one is in flight: land() or "
                "discard() it first (one exchange is in flight at most)."
            )
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(1, "easgd_exchange")
        self._in_flight = self._thread.submit(exchange, values)

    def land(self):
        """Waits for the exchange in flight, if any, and takes it off.

        Returns:
            What its exchange returned, or None if none was in flight.

        Raises:
            TimeoutError: if it has not ended within the deadline (then it is dropped).
            Exception: the exchange's own error.
        """
        ended = self._take("to land it")
        return None if ended is None else ended.result()

    def discard(self):
        """Waits for the exchange in flight, if any, and drops it, with its result or its
        error: the worker starts again from the centre, which has the move already (or
        lost it with its parameter server).

        Raises:
            TimeoutError: if it has not ended within the deadline (then it is dropped).
        """
        self._take("before starting again from the centre")

    def close(self):
        """Discards the exchange in flight and lets the thread end; `send` starts another.

        Raises:
            TimeoutError: as `discard`; the thread is let go all the same.
        """
        try:
            self.discard()
        finally:
            self._let_go()

    def _take(self, why):
        """The ended future of the exchange in flight, taken off; None if none."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return None
        done, _ = concurrent.futures.wait([in_flight], self._timeout)
        if not done:
            self._let_go()  # Busy: a later exchange gets a thread of its own.
            raise TimeoutError(
                f"{self._name} waited {self._timeout:g} s (timeout_secs) for its exchange in "
                f"flight {why}, and it has not ended: the parameter servers did not answer."
            )
        return in_flight

    def _let_go(self):
        """Shuts the thread down without waiting: it ends after its exchange, if busy."""
        if self._thread is not None:
            thread, self._thread = self._thread, None
            thread.shutdown(wait=False)
