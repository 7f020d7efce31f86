"""The overlapped exchange: the worker trains on while its exchange is in flight.

`OverlappedExchange` is the exchange of `ElasticAverageOptimizer(overlap=True)`. An
exchange step only hands a copy of x to a background thread (a `QueueRunner`) and lands
the elastic move of the exchange before it; the thread sends the copy, moves the centre
and queues the difference it moved by for the worker to scale. docs/DESIGN.md ("The
overlapped exchange").
"""

import contextlib

import tensorflow as tf

from tf_contrib_easgd.exchange import wire as wire_format
from tf_contrib_easgd.exchange.gating import run_if
from tf_contrib_easgd.exchange.task_groups import remote_target
from tf_contrib_easgd.exchange.variable_address import (
    read_copy,
    subtract_scaled,
    variable_kind,
)

QUEUE_NAME = "overlapped_exchange"
#: The deadline of a runner's step, in place of the session's operation timeout: a week,
#: so never (TensorFlow takes a run's own timeout over the session's, and has no "none").
STEP_TIMEOUT_MS = 7 * 24 * 3600 * 1000


class OverlappedExchange:
    """Builds the overlapped exchange of one worker.

    On an exchange step (after its local step) the training op:
    1. if an exchange is in flight, waits for its reply (x_s - x~, x~) and lands it:
       x <- x - alpha * (x_s - x~), local centre <- x~;
    2. queues a copy x_s of x, as it is after 1, and marks an exchange in flight.

    The runner thread takes x_s, reads the centre x~ on its parameter server, moves
    x~ <- x~ + alpha * (x_s - x~) (adding one to `global_step`) and queues (x_s - x~, x~)
    for the worker, whose landing moves x <- x - alpha * (x_s - x~) with the kernel the
    centre's move used: the centre and the worker move by the same d, to the bit, computed
    from the copy sent. The worker's move lands one period later, at its next exchange
    step, on top of the local steps it took meanwhile. With one period of delay the exchange
    has tau local steps to travel; a step waits only if it has not come back by then. The
    runner's arithmetic on the worker is a subtraction (and the 16-bit wire's casts); the
    landing scales it as it subtracts: on a worker whose core also trains, every pass over
    the model counts.

    With a 16-bit `wire`, a centre on another task is sent and returned as 16-bit
    differences from the reference both sides hold, as `ElasticExchange` does: the copy
    queued is s = wire(x - local centre), the runner moves the centre by
    d = alpha * (s - e), e = wire(centre - reference), queues (s - e, e) in full width, and
    the landing moves the worker by d and the local centre by e.

    The runner is a `tf.compat.v1.train.QueueRunner` in the `QUEUE_RUNNERS` collection:
    `MonitoredTrainingSession`, Estimator and `tf.compat.v1.train.start_queue_runners`
    start it. Its queues belong to one session (no shared name), and the in-flight flag is
    a local variable, so a new session starts with nothing in flight.
    """

    def __init__(self, centered, worker_device, moving_rate, global_step, use_locking, wire=None):
        """Builds the queues, the in-flight flag and the runner of the exchange.

        Args:
            centered: the `CenteredVariable`s to exchange.
            worker_device: device string of this worker.
            moving_rate: the elastic rate alpha, a Python float.
            global_step: a variable to increment once per exchange, or None.
            use_locking: whether the updates take locks.
            wire: a `wire.Wire` to send the values of the centres on other tasks in 16
                bits; None sends them at full width.
        """
        self._centered = list(centered)
        self._worker_device = worker_device
        self._moving_rate = moving_rate
        self._global_step = global_step
        self._use_locking = use_locking
        self._wire = wire
        worker = tf.DeviceSpec.from_string(worker_device or "")
        # The reference of each centre sent narrowed (on another task), else None.
        self._references = [
            wire.reference(entry)
            if wire is not None
            and wire.narrows(entry.worker)
            and remote_target(entry.global_center, worker) is not None
            else None
            for entry in self._centered
        ]
        dtypes = [entry.worker.dtype.base_dtype for entry in self._centered]
        sent_dtypes = [
            dtype if reference is None else wire.dtype
            for dtype, reference in zip(dtypes, self._references, strict=True)
        ]
        shapes = [entry.worker.shape for entry in self._centered]
        with tf.compat.v1.device(worker_device), tf.name_scope(QUEUE_NAME):
            self._in_flight = tf.compat.v1.Variable(
                False,
                trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
                name="in_flight",
            )
            self._copies = tf.queue.FIFOQueue(1, sent_dtypes, shapes, name="copies")
            self._replies = tf.queue.FIFOQueue(1, dtypes * 2, shapes * 2, name="replies")
            exchange = self._replies.enqueue(self._exchange_with_centres(self._copies.dequeue()))
            # Closing both queues ends the runner's wait for a copy, and any step's wait.
            close = tf.group(
                self._copies.close(cancel_pending_enqueues=True),
                self._replies.close(cancel_pending_enqueues=True),
            )
            runner = ExchangeRunner(self._copies, [exchange], close_op=close, cancel_op=close)
        tf.compat.v1.train.add_queue_runner(runner)
        self.queue_runner = runner

    def __call__(self):
        """Builds the exchange step in the current context; returns a bool tensor, True when
        done."""
        with tf.compat.v1.device(self._worker_device):
            landed = self._land_if_in_flight()
            with tf.control_dependencies([landed]):
                sent = self._copies.enqueue(
                    [
                        read_copy(entry.worker)
                        if reference is None
                        else wire_format.encode(
                            entry.worker.read_value(),
                            entry.local_center.read_value(),
                            self._wire.dtype,
                        )
                        for entry, reference in zip(self._centered, self._references, strict=True)
                    ]
                )
            with tf.control_dependencies([sent]):
                flag = tf.compat.v1.assign(self._in_flight, True, use_locking=self._use_locking)
            with tf.control_dependencies([flag]):
                return tf.constant(True)

    def finish(self):
        """Builds the op that waits for the exchange in flight, if any, and lands its move."""
        with tf.compat.v1.device(self._worker_device), tf.name_scope(f"{QUEUE_NAME}_finish"):
            landed = self._land_if_in_flight()
            with tf.control_dependencies([landed]):
                return tf.compat.v1.assign(self._in_flight, False, use_locking=self._use_locking).op

    def _land_if_in_flight(self):
        """Builds the landing of the reply in flight, skipped when nothing is in flight;
        returns a bool tensor ready on every run."""
        return run_if(self._in_flight.read_value(), self._land, name="land")

    def _land(self):
        """Builds the landing of the reply in flight: x <- x - alpha * difference, and the
        local centre set to the centre read (full width) or moved by e (16-bit wire)."""
        reply = self._replies.dequeue()
        count = len(self._centered)
        moves = []
        pairs = zip(self._centered, self._references, strict=True)
        for (entry, reference), difference, received in zip(
            pairs, reply[:count], reply[count:], strict=True
        ):
            local_centre, use_locking = entry.local_center, self._use_locking
            if reference is None:  # `received` is the centre, else e.
                moves.append(tf.compat.v1.assign(local_centre, received, use_locking=use_locking))
            else:
                moves.append(
                    tf.compat.v1.assign_add(local_centre, received, use_locking=use_locking)
                )
            moves.append(_subtract_scaled(entry.worker, self._moving_rate, difference, use_locking))
        with tf.control_dependencies(moves):
            return tf.constant(True)

    def _exchange_with_centres(self, copies):
        """Builds the runner's exchange of the copies `copies`; returns [difference...,
        centre or e...] for the landing.

        Only the copies go to the parameter servers and only the centres come back: the
        worker takes its difference from the same two values, with the same operation, as
        the parameter server takes the centre's.
        """
        if not isinstance(copies, list | tuple):  # A queue of one component gives a tensor.
            copies = [copies]
        differences, received, moves = [], [], []
        for entry, reference, copy in zip(self._centered, self._references, copies, strict=True):
            exchange = self._exchange_one if reference is None else self._exchange_one_narrowed
            difference, centre_or_e, move = exchange(entry, reference, copy)
            differences.append(difference)
            received.append(centre_or_e)
            moves += move
        if self._global_step is not None:
            with (
                tf.control_dependencies(moves),
                tf.compat.v1.device(self._global_step.device),
            ):
                moves.append(
                    tf.compat.v1.assign_add(self._global_step, 1, use_locking=self._use_locking)
                )
        with tf.control_dependencies(moves), tf.compat.v1.device(self._worker_device):
            return [tf.identity(tensor) for tensor in differences + received]

    def _exchange_one(self, entry, reference, copy):
        """The runner's exchange of one variable at full width; returns (copy - centre for
        the worker's landing, the centre read, the centre's update ops). `reference` is
        None."""
        del reference
        # The centre is read once the copy has arrived, not when the runner's step starts
        # (a period earlier, before other workers' exchanges moved it).
        with tf.compat.v1.device(entry.global_center.device), tf.control_dependencies([copy]):
            centre = read_copy(entry.global_center)
            # centre - alpha * (centre - copy): centre + d, d = alpha * (copy - centre).
            move = _subtract_scaled(
                entry.global_center, self._moving_rate, centre - copy, self._use_locking
            )
        with tf.compat.v1.device(self._worker_device):
            return copy - centre, tf.identity(centre), [move]

    def _exchange_one_narrowed(self, entry, reference, sent):
        """The runner's 16-bit exchange of one variable: `sent` is s = wire(x - local
        centre); returns (s - e for the worker's landing, e in full width, the updates of
        the centre and its reference on the ps), e = wire(centre - reference). The 16-bit
        s and e are what cross between the worker and the ps."""
        dtype = entry.worker.dtype.base_dtype
        # Read once `sent` has arrived (see `_exchange_one`); the reference's update, which
        # needs nothing else, would otherwise run before it too.
        with tf.compat.v1.device(entry.global_center.device), tf.control_dependencies([sent]):
            received = wire_format.encode(
                entry.global_center.read_value(), reference.read_value(), self._wire.dtype
            )
            received_value = wire_format.decode(received, dtype)
            difference = wire_format.wire_difference(
                received_value, wire_format.decode(sent, dtype)
            )
            moves = [
                _subtract_scaled(
                    entry.global_center, self._moving_rate, difference, self._use_locking
                ),
                tf.compat.v1.assign_add(reference, received_value, use_locking=self._use_locking),
            ]
        with tf.compat.v1.device(self._worker_device):
            received_value = wire_format.decode(received, dtype)
            difference = wire_format.wire_difference(
                wire_format.decode(sent, dtype), received_value
            )
            return difference, received_value, moves


def _subtract_scaled(variable, moving_rate, difference, use_locking):
    """Builds `variable -= alpha * difference` on the variable's device; returns the op.

    Resource and ref variables take `variable_address.subtract_scaled`'s kernel: one pass,
    `alpha * difference` rounded before it subtracts. Other variables take `assign_sub` of
    that product: the same bits.
    """
    alpha, kind = tf.cast(moving_rate, variable.dtype.base_dtype), variable_kind(variable)
    with tf.compat.v1.device(variable.device):
        if kind is None:
            return tf.compat.v1.assign_sub(variable, alpha * difference, use_locking=use_locking).op
        target = variable.handle if kind == "resource" else variable  # A ref op takes the ref.
        return subtract_scaled(kind, target, alpha, difference, use_locking)


class ExchangeRunner(tf.compat.v1.train.QueueRunner):
    """The `QueueRunner` of the overlapped exchange: its thread waits for copies as long as
    the worker is idle.

    Its step takes the next copy from the queue, which blocks until the worker queues one,
    then exchanges it and queues the reply. Its steps run without the session's operation
    timeout (`ConfigProto.operation_timeout_in_ms`): a step failed by it after taking a
    copy would lose that exchange, and the worker's next landing would wait for a reply
    that never comes; one failed while waiting would end a plain `QueueRunner` although
    the worker is only evaluating, saving or waiting for the others. Closing the queues
    ends the wait (the session's close, or `coord` stopping); every error goes to the
    coordinator as a `QueueRunner`'s does, and a closed queue ends its thread.
    """

    def _run(self, sess, enqueue_op, coord=None):
        """Runs `enqueue_op` in a loop until the queues close or `coord` stops."""
        exchange = sess.make_callable(enqueue_op, accept_options=True)
        patient = tf.compat.v1.RunOptions(timeout_in_ms=STEP_TIMEOUT_MS)
        closed = False
        try:
            while not (coord and coord.should_stop()):
                try:
                    exchange(options=patient)
                except self._queue_closed_exception_types:
                    closed = True
                    break
        except Exception as error:  # As `QueueRunner`: to the coordinator, or raised.
            if coord is None:
                with self._lock:
                    self._exceptions_raised.append(error)
                raise
            coord.request_stop(error)
        finally:
            with self._lock:
                self._runs_per_session[sess] -= 1
                last = self._runs_per_session[sess] == 0
            if closed and last:
                # The last thread of a queue closed under it closes the other queue too.
                with contextlib.suppress(tf.errors.OpError):
                    sess.run(self._close_op)
