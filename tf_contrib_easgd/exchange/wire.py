"""The exchange's 16-bit wire: differences against a reference that both sides hold.

With `ElasticAverageOptimizer(wire_dtype=tf.bfloat16)` (or `tf.float16`) an exchange with a
parameter server sends each value as a 16-bit difference from the worker's local centre,
and receives the centre as a 16-bit difference from the same reference, which the
parameter server keeps a float32 copy of for each worker (`Wire`). Both sides
then compute the same d from the two 16-bit tensors. The centre stays float32 on the ps.
docs/DESIGN.md ("A 16-bit wire") gives the semantics and why rounding does not accumulate.
"""

import tensorflow as tf

from tf_contrib_easgd.exchange.variable_address import read_copy

#: The dtypes a wire may have, by name.
WIRE_DTYPES = {"bfloat16": tf.bfloat16, "float16": tf.float16}
#: The name scope, from the graph's root, of the references on the parameter servers.
REFERENCE_SCOPE = "easgd_wire_reference"


def check_wire_dtype(value):
    """Checks `wire_dtype`: None or float32 (full width), bfloat16 or float16.

    Args:
        value: None, a `tf.DType` or a dtype's name.

    Returns:
        None for a full-width wire, else the 16-bit `tf.DType`.

    Raises:
        TypeError: if `value` is neither None, a `tf.DType` nor a string.
        ValueError: if it names another dtype.
    """
    if value is None:
        return None
    if not isinstance(value, tf.DType | str):
        raise TypeError(
            f"wire_dtype must be None, a tf.DType or a dtype's name, got {value!r} of type "
            f"{type(value).__name__}."
        )
    name = value if isinstance(value, str) else value.name
    if name == "float32":
        return None
    if name not in WIRE_DTYPES:
        raise ValueError(
            "wire_dtype must be one of [None, 'float32', 'bfloat16', 'float16'] (or the "
            f"tf.DType of one of them); got {value!r}."
        )
    return WIRE_DTYPES[name]


def encode(value, reference, wire_dtype):
    """Builds what crosses the wire for `value`: `value - reference`, rounded to `wire_dtype`."""
    return tf.cast(value - reference, wire_dtype)


def decode(sent, dtype):
    """Builds the full-width value of a wire tensor `sent` (exact: 16 bits fit in `dtype`)."""
    return tf.cast(sent, dtype)


def wire_difference(sent, received):
    """Builds `sent - received` in full width from two wire tensors decoded to the same dtype.

    Each side of an exchange scales this by alpha to get d (`VariableAddress.subtract_scaled`):
    the worker subtracts alpha * (sent - received), the centre subtracts
    alpha * (received - sent), the same d to the bit, the other way.
    """
    return sent - received


class Wire:
    """A 16-bit wire of one worker: its dtype, and the references on the parameter servers.

    A reference is the parameter server's float32 copy of one of this worker's local
    centres. It lives beside its global centre, is named after the worker
    (`easgd_wire_reference/worker_3/NAME`) so that workers never share one, and is a local
    variable of the worker's graph, so it is in no checkpoint and the worker's local init
    creates it. The worker's init op sets it and the local centre from one read of the
    centre (`init_ops`); each exchange then moves both by the same decoded difference.
    """

    def __init__(self, dtype, worker_device):
        """Names this worker's references after `worker_device`; creates nothing yet.

        Args:
            dtype: the wire's dtype, `tf.bfloat16` or `tf.float16`.
            worker_device: device string of this worker, e.g. "/job:worker/task:3".
        """
        self.dtype = dtype
        spec = tf.DeviceSpec.from_string(worker_device or "")
        self._label = f"{spec.job or 'worker'}_{spec.task or 0}"
        self._references = {}  # Global centre's name -> (CenteredVariable, reference).
        self._started = False  # Whether an init op was built: no new reference after it.

    def narrows(self, variable):
        """Whether `variable`'s values cross this wire narrowed: float32 and float64 ones do,
        others cross at their own width."""
        return variable.dtype.base_dtype in (tf.float32, tf.float64)

    def reference(self, entry):
        """The reference of `entry`'s global centre on its task, created on first use.

        Args:
            entry: a `CenteredVariable` whose global centre lives on another task.

        Returns:
            The reference variable.

        Raises:
            RuntimeError: if the reference is new and the init op was built already.
        """
        centre = entry.global_center
        if centre.name not in self._references:
            if self._started:
                raise RuntimeError(
                    f"An exchange of {centre.name} was built after get_init_op: with a "
                    "16-bit wire, build every train op before the init op (or the hook)."
                )
            self._references[centre.name] = (entry, self._create(centre))
        return self._references[centre.name][1]

    def _create(self, centre):
        base = centre.op.name.split("/", 1)[-1]
        name = f"{REFERENCE_SCOPE}/{self._label}/{base}"
        graph = tf.compat.v1.get_default_graph()
        for variable in graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES):
            if variable.op.name == name:  # Made by another optimizer of the same model.
                return variable
        # No device function: a replica_device_setter would count the variable in its
        # round robin and move the next variables of the model to other tasks.
        with (
            tf.compat.v1.device(None),
            tf.compat.v1.device(centre.device),
            tf.compat.v1.name_scope(f"{REFERENCE_SCOPE}/{self._label}/"),
        ):
            return tf.compat.v1.Variable(
                tf.zeros(centre.shape, centre.dtype.base_dtype),
                trainable=False,
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
                name=base,
                use_resource=centre.op.type == "VarHandleOp",
            )

    def init_ops(self):
        """Builds, for each reference made so far, the assignment of one read of its global
        centre to the reference (on the ps), the local centre and the worker copy; returns
        the ops. They replace the plain start of these variables (startup.py); no new
        reference can be made after them."""
        self._started = True
        ops = []
        for entry, reference in self._references.values():
            with tf.compat.v1.device(entry.global_center.device):
                # One read for all three: the centre may move between two reads.
                centre = read_copy(entry.global_center)
                ops.append(tf.compat.v1.assign(reference, centre).op)
            with tf.compat.v1.device(entry.worker.device):
                ops.append(tf.compat.v1.assign(entry.worker, centre).op)
                ops.append(tf.compat.v1.assign(entry.local_center, centre).op)
        return ops

    def entries(self):
        """The `CenteredVariable`s that have a reference."""
        return [entry for entry, _ in self._references.values()]
