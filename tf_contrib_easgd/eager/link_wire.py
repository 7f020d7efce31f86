"""The eager worker's 16-bit wire: each variable's exchange as 16-bit differences.

With `wire_dtype=tf.bfloat16` (or `tf.float16`) a `CentreLink` exchanges each float32 or
float64 variable as `ElasticAverageOptimizer`'s wire does (docs/DESIGN.md, "A 16-bit
wire"): against a reference r that both sides hold, the worker sends s = wire(x - r), the
parameter server answers e = wire(c - r), both compute d = alpha * (s - e) and add e to
their r. `LinkWire` builds the references and these ops in the link's graph.
"""

import tensorflow as tf

from tf_contrib_easgd.exchange import wire as wire_format

#: The name scope of the worker's own copies of its references (in the link's graph).
OWN_SCOPE = "own"


class LinkWire:
    """The 16-bit wire of one worker's `CentreLink`: its references and its exchanges.

    Each narrowed variable has a reference r, held twice in its own dtype: on its centre's
    parameter server, named after the worker (`easgd_wire_reference/worker_3/NAME`, so
    workers never share one), and on the worker (`easgd_wire_reference/own/NAME`). Both
    are local variables of the link's graph: in no checkpoint, zeros after each session's
    local init, then set from one read of the centre (`start`) whenever the worker starts
    from the centre. An exchange moves both by the same e, so they never differ.
    """

    def __init__(self, dtype, task, moving_rate):
        """Names the references after `task`; builds nothing yet.

        Args:
            dtype: the wire's dtype, `tf.bfloat16` or `tf.float16`.
            task: the worker's `ClusterTask`.
            moving_rate: alpha, a float in (0, 1].
        """
        self.dtype = dtype
        self._worker = task.device
        self._label = f"{task.job_name}_{task.task_index}"
        self._moving_rate = moving_rate
        self._references = {}  # Centre's name -> (reference on the ps, reference here).

    @staticmethod
    def narrows(spec):
        """Whether the values of `spec`'s variable cross narrowed: float32 and float64 ones
        do, as the optimizer's wire; other dtypes cross at their own width."""
        return spec.dtype in (tf.float32, tf.float64)

    def exchange(self, spec, centre, value):
        """Builds one variable's exchange over the wire.

        Args:
            spec: the variable's `CentreSpec`.
            centre: its centre, a variable on a parameter server.
            value: the worker's value x, fed on the worker.

        Returns:
            `(d, move)`: d = alpha * (s - e), computed on the worker once its reference
            has moved by e, for it to subtract from x; and the op on the parameter server
            that adds the same d (computed there from the same 16-bit tensors, with the
            same ops) to the centre and e to its reference.
        """
        held, own = self._references_of(spec, centre)
        with tf.compat.v1.device(self._worker):
            sent = wire_format.encode(value, own.value(), self.dtype)
        with tf.compat.v1.device(centre.device):
            received = wire_format.encode(centre.value(), held.value(), self.dtype)
            received_there = wire_format.decode(received, spec.dtype)
            delta_there = self._scaled(wire_format.decode(sent, spec.dtype), received_there)
            move = tf.group(
                centre.assign_add(delta_there, read_value=False),
                held.assign_add(received_there, read_value=False),
            )
        with tf.compat.v1.device(self._worker):
            received_here = wire_format.decode(received, spec.dtype)
            delta = self._scaled(wire_format.decode(sent, spec.dtype), received_here)
            with tf.control_dependencies([sent]):  # r is read for s before it moves.
                own_move = own.assign_add(received_here, read_value=False)
            with tf.control_dependencies([own_move]):
                # Not global_step's dependency, as the ps's moves: no round trip more.
                return tf.identity(delta), move

    def start(self, spec, centre):
        """Builds the worker's start from the centre: one read of it, assigned to both
        references. Returns `(the read, the op assigning it)`."""
        held, own = self._references_of(spec, centre)
        with tf.compat.v1.device(centre.device):
            read = tf.identity(centre.value())  # One read for both: the centre moves.
            assigned = [held.assign(read, read_value=False)]
        with tf.compat.v1.device(self._worker):
            assigned.append(own.assign(read, read_value=False))
        return read, tf.group(*assigned)

    def references(self):
        """Each narrowed variable's references, by its centre's name: `(the one on the
        parameter server, the worker's own)`."""
        return dict(self._references)

    def _scaled(self, sent, received):
        """d = alpha * (s - e), the same ops on either side, so the same bits."""
        difference = wire_format.wire_difference(sent, received)
        return tf.cast(self._moving_rate, difference.dtype) * difference

    def _references_of(self, spec, centre):
        if spec.name not in self._references:
            self._references[spec.name] = (
                _local_variable(spec, centre.device, f"{self._label}/{spec.name}"),
                _local_variable(spec, self._worker, f"{OWN_SCOPE}/{spec.name}"),
            )
        return self._references[spec.name]


def _local_variable(spec, device, name):
    """A variable of `spec`'s shape and dtype on `device`, zeros, a local variable named
    `easgd_wire_reference/NAME`."""
    with tf.compat.v1.device(device), tf.compat.v1.name_scope(None):
        return tf.compat.v1.Variable(
            tf.zeros(spec.shape, spec.dtype),
            trainable=False,
            collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
            name=f"{wire_format.REFERENCE_SCOPE}/{name}",
            use_resource=True,
        )
