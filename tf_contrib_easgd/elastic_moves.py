"""The move form of the elastic penalty: x <- x - eta * rho * (x_t - x~') on every local step.

`ElasticMoves` builds the moves of one local step around the wrapped optimizer's update;
`penalty.ElasticPenalty.moves` makes it. docs/DESIGN.md ("The elastic penalty").
"""

import contextlib

import tensorflow as tf


class ElasticMoves:
    """The move form's elastic moves of one local step, x <- x - eta * rho * (x_t - x~').

    Built before the wrapped optimizer's update: the deltas eta * rho * (x_t - x~') are new
    tensors computed from reads of x_t and of its local centre. `before()` makes the update
    wait for all of them, so that every read happens before the update changes x (in TF1
    mode a ref variable's read aliases its buffer until the subtraction copies it; in TF 2
    graph mode nothing else orders a resource variable's read before an update). `after()`
    subtracts them once the update is done. With no moves both are no-ops and add nothing
    to the graph.
    """

    def __init__(self, centered, coefficient, device):
        """Computes the deltas.

        Args:
            centered: the `CenteredVariable`s to move; empty for no move.
            coefficient: eta * rho, a float or a scalar tensor (unused if `centered` is
                empty).
            device: the worker device.
        """
        self._device = device
        self._moves = []
        if not centered:
            return
        with tf.compat.v1.device(device), tf.name_scope("elastic_move"):
            for entry in centered:
                dtype = entry.worker.dtype.base_dtype
                if isinstance(coefficient, float):
                    scale = tf.constant(coefficient, dtype)
                else:
                    scale = tf.cast(coefficient, dtype)
                # The same point as the gradient form's penalty, rho * l2_loss(x - x~').
                distance = entry.worker - entry.local_center
                self._moves.append((entry.worker, scale * distance))

    @property
    def deltas(self):
        """The tensors eta * rho * (x_t - x~'), one per variable."""
        return [delta for _, delta in self._moves]

    def before(self):
        """A context in which the ops built (the wrapped optimizer's update) wait for the deltas."""
        if not self._moves:
            return contextlib.nullcontext()
        return tf.control_dependencies(self.deltas)

    def after(self, update, use_locking):
        """Returns an op that runs `update`, then subtracts each delta from its variable.

        Args:
            update: the wrapped optimizer's update op.
            use_locking: whether the subtractions take locks.

        Returns:
            `update` itself when there is no move.
        """
        if not self._moves:
            return update
        with (
            tf.compat.v1.device(self._device),
            tf.name_scope("elastic_move"),
            tf.control_dependencies([update]),
        ):
            return tf.group(
                *(
                    tf.compat.v1.assign_sub(variable, delta, use_locking=use_locking)
                    for variable, delta in self._moves
                )
            )
