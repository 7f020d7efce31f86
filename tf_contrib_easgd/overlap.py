"""The overlapped exchange: the worker trains on while its exchange is in flight.

`OverlappedExchange` is the exchange of `ElasticAverageOptimizer(overlap=True)`. An
exchange step only hands a copy of x to a background thread (a `QueueRunner`) and lands
the elastic move of the exchange before it; the thread sends the copy, moves the centre
and queues the move for the worker. docs/DESIGN.md ("The overlapped exchange").
"""

import tensorflow as tf

from tf_contrib_easgd.exchange import elastic_difference
from tf_contrib_easgd.gating import run_if

QUEUE_NAME = "overlapped_exchange"


class OverlappedExchange:
    """Builds the overlapped exchange of one worker.

    On an exchange step (after its local step) the training op:
    1. if an exchange is in flight, waits for its reply (d, centre) and lands it:
       x <- x - d, local centre <- centre;
    2. queues a copy x_s of x, as it is after 1, and marks an exchange in flight.

    The runner thread takes x_s, reads the centre x~ on its parameter server, computes
    d = alpha * (x_s - x~), moves x~ <- x~ + d (adding one to `global_step`) and queues
    (d, x~) for the worker. The centre and the worker move by the same d, computed from
    the copy sent; the worker's move lands one period later, at its next exchange step,
    on top of the local steps it took meanwhile. With one period of delay the exchange has
    tau local steps to travel; a step waits only if it has not come back by then.

    The runner is a `tf.compat.v1.train.QueueRunner` in the `QUEUE_RUNNERS` collection:
    `MonitoredTrainingSession`, Estimator and `tf.compat.v1.train.start_queue_runners`
    start it. Its queues belong to one session (no shared name), and the in-flight flag is
    a local variable, so a new session starts with nothing in flight.
    """

    def __init__(self, centered, worker_device, moving_rate, global_step, use_locking):
        """Builds the queues, the in-flight flag and the runner of the exchange.

        Args:
            centered: the `CenteredVariable`s to exchange.
            worker_device: device string of this worker.
            moving_rate: the elastic rate alpha, a Python float.
            global_step: a variable to increment once per exchange, or None.
            use_locking: whether the updates take locks.
        """
        self._centered = list(centered)
        self._worker_device = worker_device
        self._moving_rate = moving_rate
        self._global_step = global_step
        self._use_locking = use_locking
        dtypes = [entry.worker.dtype.base_dtype for entry in self._centered]
        shapes = [entry.worker.shape for entry in self._centered]
        with tf.compat.v1.device(worker_device), tf.name_scope(QUEUE_NAME):
            self._in_flight = tf.compat.v1.Variable(
                False,
                trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
                name="in_flight",
            )
            self._copies = tf.queue.FIFOQueue(1, dtypes, shapes, name="copies")
            self._replies = tf.queue.FIFOQueue(1, dtypes * 2, shapes * 2, name="replies")
            exchange = self._replies.enqueue(self._exchange_with_centres(self._copies.dequeue()))
            # Closing both queues ends the runner's wait for a copy, and any step's wait.
            close = tf.group(
                self._copies.close(cancel_pending_enqueues=True),
                self._replies.close(cancel_pending_enqueues=True),
            )
            runner = tf.compat.v1.train.QueueRunner(
                self._copies, [exchange], close_op=close, cancel_op=close
            )
        tf.compat.v1.train.add_queue_runner(runner)
        self.queue_runner = runner

    def __call__(self):
        """Builds the exchange step in the current context; returns a bool tensor, True when
        done."""
        with tf.compat.v1.device(self._worker_device):
            landed = self._land_if_in_flight()
            with tf.control_dependencies([landed]):
                copies = [_read_copy(entry.worker) for entry in self._centered]
                sent = self._copies.enqueue(copies)
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
        """Builds the landing of the reply in flight: x <- x - d, local centre <- centre."""
        reply = self._replies.dequeue()
        count = len(self._centered)
        moves = []
        for entry, delta, centre in zip(self._centered, reply[:count], reply[count:], strict=True):
            moves.append(
                tf.compat.v1.assign(entry.local_center, centre, use_locking=self._use_locking)
            )
            moves.append(
                tf.compat.v1.assign_sub(entry.worker, delta, use_locking=self._use_locking)
            )
        with tf.control_dependencies(moves):
            return tf.constant(True)

    def _exchange_with_centres(self, copies):
        """Builds the runner's exchange of the copies `copies`; returns [d..., centre...].

        Only the copies go to the parameter servers and only the centres come back: the
        worker computes its d from the same two values, with the same operations, as the
        parameter server computes the centre's.
        """
        if not isinstance(copies, list | tuple):  # A queue of one component gives a tensor.
            copies = [copies]
        deltas, centres, moves = [], [], []
        for entry, copy in zip(self._centered, copies, strict=True):
            with tf.compat.v1.device(entry.global_center.device):
                centre = _read_copy(entry.global_center)
                moves.append(
                    tf.compat.v1.assign_add(
                        entry.global_center,
                        elastic_difference(self._moving_rate, copy, centre),
                        use_locking=self._use_locking,
                    )
                )
            with tf.compat.v1.device(self._worker_device):
                deltas.append(elastic_difference(self._moving_rate, copy, centre))
                centres.append(tf.identity(centre))
        if self._global_step is not None:
            with (
                tf.control_dependencies(moves),
                tf.compat.v1.device(self._global_step.device),
            ):
                moves.append(
                    tf.compat.v1.assign_add(self._global_step, 1, use_locking=self._use_locking)
                )
        with tf.control_dependencies(moves), tf.compat.v1.device(self._worker_device):
            return [tf.identity(tensor) for tensor in deltas + centres]


def _read_copy(variable):
    """A read of `variable` that keeps its value when the variable is updated later: a ref
    variable's read is its buffer, which later updates change in place, unless copied."""
    value = variable.read_value()
    if variable.dtype != variable.dtype.base_dtype:  # A ref dtype, such as float32_ref.
        return tf.raw_ops.Snapshot(input=value)
    return value
