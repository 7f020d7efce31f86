"""The arithmetic of one variable's exchange, on each side of the wire.

`ExchangeHalves` builds the parameter server's half (the centre's read and move) and the
worker's half (the worker's move and its local centre) of one variable's exchange, at full
width or over a 16-bit wire (wire.py), and a task's half of its exchange with a worker.
Both halves move by the same d to the bit. `ElasticExchange` builds its functions from
them, and a subclass may override them (the benchmarks' copy-only exchange does).
docs/DESIGN.md ("The exchange", "Both ways at once", "A 16-bit wire").
"""

import typing

import tensorflow as tf

from tf_contrib_easgd.exchange import wire as wire_format
from tf_contrib_easgd.exchange.variable_address import VariableAddress


class CentreRead(typing.NamedTuple):
    """A centre as a task's half of an exchange read it, before any update (`_read_centre`)."""

    centre: tf.Tensor  # The centre as read (a copy at full width).
    reply: tf.Tensor  # What the task sends back: the centre, or e over a 16-bit wire.


class TaskHalf(typing.NamedTuple):
    """A task's half of an exchange (`ExchangeHalves._task_half`).

    Attributes:
        replies: what the task sends back: the centres as read (16-bit differences where
            they cross narrowed), then the global step as read if any.
        updates: the task's update ops.
    """

    replies: list
    updates: list


class ExchangeHalves:
    """The two halves of one variable's exchange, and a task's half of its exchange with
    a worker; a mixin of `ElasticExchange`.

    It reads the exchange's `_moving_rate`, `_use_locking`, `_wire` (a `wire.Wire` or
    None), `_references` and `_narrows`.
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

    def _task_half(self, group, inputs, device):
        """Builds the ps-side half of the exchange of `group`; returns its `TaskHalf`.

        Args:
            group: the `TaskGroup`.
            inputs: the worker values of the centres, then the step increment if any.
            device: where to place the ops: None inside the function a `RemoteCall` runs
                (placed on the task by the call), the task's device in a direct call.

        Returns:
            The `TaskHalf`. The centres' replies wait for no value of the worker's: every
            read is built before any update, since a function runs its stateful ops in the
            order they were built. The global step is read after the moves (a `RemoteCall`
            takes and returns at least one tensor).
        """
        with tf.compat.v1.device(device):
            centres = [VariableAddress.of(entry.global_center) for entry in group.entries]
            references = [self._reference_address(entry) for entry in group.entries]
            reads = [
                self._read_centre(address, reference)
                for address, reference in zip(centres, references, strict=True)
            ]
            replies, moved = [read.reply for read in reads], []
            for address, reference, value, read in zip(
                centres, references, inputs, reads, strict=False
            ):
                if reference is None:
                    moved.append(self._move_centre(address, value, read.centre))
                else:
                    moved += self._wire_centre_half(address, reference, value, read)
            if group.global_step is not None:
                step = VariableAddress.of(group.global_step)
                with tf.control_dependencies(moved):
                    replies.append(step.read(copy=True))
                    moved.append(step.assign_add(inputs[-1], self._use_locking))
            return TaskHalf(replies, moved)

    def _reference_address(self, entry):
        """The address of the reference of `entry`'s centre if it crosses narrowed, else
        None."""
        if not self._narrows(entry):
            return None
        return VariableAddress.of(self._references[entry.global_center.name])

    def _read_centre(self, centre_address, reference_address):
        """Builds the task's read of one variable's centre, before any update of the exchange.

        Args:
            centre_address: the `VariableAddress` of the global centre.
            reference_address: that of its reference if the values cross on a 16-bit wire
                (docs/DESIGN.md, "A 16-bit wire"), else None.

        Returns:
            A `CentreRead`; over a 16-bit wire, its reply is e = wire(centre - reference).
        """
        if reference_address is None:
            centre = centre_address.read(copy=True)
            return CentreRead(centre, centre)
        centre = centre_address.read()  # Read before the update, which needs e.
        reply = wire_format.encode(centre, reference_address.read(), self._wire.dtype)
        return CentreRead(centre, reply)

    def _wire_centre_half(self, centre_address, reference_address, sent, read):
        """Builds the task's half of a 16-bit exchange of one variable: with s the difference
        sent and e the reply of `read` (`_read_centre`), moves the centre by
        d = alpha * (s - e) and the reference by e; returns the update ops."""
        dtype = read.centre.dtype
        sent_value = wire_format.decode(sent, dtype)
        received_value = wire_format.decode(read.reply, dtype)
        return [
            centre_address.subtract_scaled(
                _rate(self._moving_rate, dtype),
                wire_format.wire_difference(received_value, sent_value),
                self._use_locking,
            ),
            reference_address.assign_add(received_value, self._use_locking),
        ]

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
