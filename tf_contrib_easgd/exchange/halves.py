"""The arithmetic of one variable's exchange, on each side of the wire.

`ExchangeHalves` builds the parameter server's half (the centre's move) and the worker's
half (the worker's move and its local centre) of one variable's exchange, at full width
or over a 16-bit wire (wire.py). Both halves move by the same d to the bit.
`ElasticExchange` builds its functions from them, and a subclass may override them (the
benchmarks' copy-only exchange does). docs/DESIGN.md ("The exchange", "A 16-bit wire").
"""

import tensorflow as tf

from tf_contrib_easgd.exchange import wire as wire_format


class ExchangeHalves:
    """The two halves of one variable's exchange; a mixin of `ElasticExchange`.

    It reads the exchange's `_moving_rate`, `_use_locking` and `_wire` (a `wire.Wire` or
    None).
    """

    def _move_centre(self, centre_address, value, centre):
        """Builds the task's half of the exchange of one variable in a function being traced:
        moves the centre by d = alpha * (value - centre); returns the update op.

        One kernel: centre -= alpha * (centre - value), which is centre + d to the bit
        (rounding is symmetric under negation), the d that `_move_worker` subtracts.

        Args:
            centre_address: the `VariableAddress` of the global centre.
            value: the worker's value that the exchange sent.
            centre: the centre as the exchange read it.
        """
        return centre_address.subtract_scaled(
            _rate(self._moving_rate, centre.dtype), centre - value, self._use_locking
        )

    def _move_worker(self, worker, local_centre, value, centre):
        """Builds the worker's half of the exchange of one variable in a function being
        traced: sets the local centre to `centre` and moves the worker by
        d = alpha * (value - centre), the d that `_move_centre` moves the centre by the
        other way.

        Args:
            worker, local_centre: the `VariableAddress`es of the worker's variable and of
                its local centre.
            value: the worker's value that the exchange sent.
            centre: the centre as the exchange read it.

        Returns:
            The update ops.
        """
        return [
            local_centre.assign(centre, self._use_locking),
            worker.subtract_scaled(
                _rate(self._moving_rate, value.dtype), value - centre, self._use_locking
            ),
        ]

    def _wire_centre_half(self, centre_address, reference_address, sent):
        """Builds the task's half of a 16-bit exchange of one variable (docs/DESIGN.md,
        "A 16-bit wire"): with s the difference sent and e = wire(centre - reference), the
        reply, moves the centre by d = alpha * (s - e) and the reference by e.

        Returns:
            (e, the update ops).
        """
        centre = centre_address.read()  # Read before the update below, which needs e.
        received = wire_format.encode(centre, reference_address.read(), self._wire.dtype)
        sent_value = wire_format.decode(sent, centre.dtype)
        received_value = wire_format.decode(received, centre.dtype)
        updates = [
            centre_address.subtract_scaled(
                _rate(self._moving_rate, centre.dtype),
                wire_format.wire_difference(received_value, sent_value),
                self._use_locking,
            ),
            reference_address.assign_add(received_value, self._use_locking),
        ]
        return received, updates

    def _wire_worker_half(self, worker, local_centre, sent, received):
        """Builds the worker's half of a 16-bit exchange of one variable: moves the worker
        by d = alpha * (s - e), the d the centre moved by the other way, and the local
        centre by e, as the task moved the reference; returns the update ops."""
        dtype = worker.dtype
        sent_value = wire_format.decode(sent, dtype)
        received_value = wire_format.decode(received, dtype)
        return [
            worker.subtract_scaled(
                _rate(self._moving_rate, dtype),
                wire_format.wire_difference(sent_value, received_value),
                self._use_locking,
            ),
            local_centre.assign_add(received_value, self._use_locking),
        ]

    def _update_worker(self, worker, local_centre, centre, delta):
        """Builds the local centre's assignment of `centre` and the worker's subtraction of
        `delta`; returns the two ops."""
        return [
            local_centre.assign(centre, self._use_locking),
            worker.assign_sub(delta, self._use_locking),
        ]


def elastic_difference(moving_rate, value, centre):
    """Builds d = alpha * (value - centre), rounding the difference, then the product: the
    plain exchange's moves take d from here, and the kernel of `subtract_scaled` (the
    calls, the overlapped exchange) rounds alike, so that the worker and the centre move
    by the same bits."""
    return tf.cast(moving_rate, centre.dtype) * (value - centre)


def _rate(moving_rate, dtype):
    """The moving rate alpha as a scalar of `dtype`, as `elastic_difference` rounds it."""
    return tf.cast(moving_rate, dtype)
