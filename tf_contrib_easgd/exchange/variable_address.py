"""How a graph function finds a variable: by its container and shared name, as the
variable op does, in both variable worlds (resource and ref variables).

docs/DESIGN.md ("The exchange") says why the exchange's functions address variables so.
"""

import dataclasses

import tensorflow as tf

_RESOURCE_VARIABLE_OPS = ("VarHandleOp",)
_REF_VARIABLE_OPS = ("VariableV2", "Variable")


def read_copy(variable):
    """Builds a read of `variable` that keeps its value when the variable is updated later:
    a ref variable's read is its buffer, which later updates change in place, unless
    copied; a resource variable's read already keeps its value."""
    value = variable.read_value()
    if variable.dtype != variable.dtype.base_dtype:  # A ref dtype, such as float32_ref.
        return tf.raw_ops.Snapshot(input=value)
    return value


def variable_kind(variable):
    """The world of `variable`: "resource" or "ref", else None (another kind)."""
    if variable.op.type in _RESOURCE_VARIABLE_OPS:
        return "resource"
    return "ref" if variable.op.type in _REF_VARIABLE_OPS else None


def is_addressable(variable):
    """Whether a function can find `variable` by name (`VariableAddress`)."""
    return variable_kind(variable) is not None


def subtract_scaled(kind, target, scale, delta, use_locking):
    """Builds `variable -= scale * delta` as one kernel; returns the op.

    The kernel (TensorFlow's gradient-descent update) rounds `scale * delta` to the
    variable's dtype before it subtracts, as the two separate ops would, so the result is
    the same to the bit, with one pass over the variable and no temporary.

    Args:
        kind: the variable's `variable_kind`, "resource" or "ref".
        target: its resource handle, or the ref variable (or ref tensor) itself.
        scale: a scalar tensor of the variable's dtype.
        delta: a tensor of the variable's shape and dtype.
        use_locking: whether the update takes the variable's lock.
    """
    if kind == "resource":
        return tf.raw_ops.ResourceApplyGradientDescent(
            var=target, alpha=scale, delta=delta, use_locking=use_locking
        )
    return tf.raw_ops.ApplyGradientDescent(
        var=target, alpha=scale, delta=delta, use_locking=use_locking
    ).op


@dataclasses.dataclass(frozen=True)
class VariableAddress:
    """How a function running on a variable's task finds the variable: its kind and names."""

    kind: str  # "resource" or "ref"
    container: str
    shared_name: str
    dtype: tf.DType
    shape: tf.TensorShape

    @classmethod
    def of(cls, variable):
        """The address of `variable`, a variable for which `is_addressable` holds."""
        op, kind = variable.op, variable_kind(variable)
        shared_name = op.get_attr("shared_name").decode() or op.name
        return cls(
            kind,
            op.get_attr("container").decode(),
            shared_name,
            variable.dtype.base_dtype,
            variable.shape,
        )

    def is_initialized(self):
        """Builds a scalar bool op: whether the variable is initialised where it runs."""
        if self.kind == "resource":
            return tf.raw_ops.VarIsInitializedOp(resource=self._handle())
        return tf.raw_ops.IsVariableInitialized(ref=self._ref())

    def read(self, copy=False):
        """Builds a read of the variable.

        Args:
            copy: whether the value must stay as read when the variable is updated later
                in the same step. A resource variable's read always does (an update copies
                the buffer while a read holds it); a ref variable's read is its buffer
                unless copied.
        """
        if self.kind == "resource":
            return tf.raw_ops.ReadVariableOp(resource=self._handle(), dtype=self.dtype)
        if copy:
            return tf.raw_ops.Snapshot(input=self._ref())
        return tf.raw_ops.Identity(input=self._ref())

    def assign(self, value, use_locking):
        """Builds an assignment of `value` to the variable; returns the op."""
        if self.kind == "resource":
            return tf.raw_ops.AssignVariableOp(resource=self._handle(), value=value)
        return tf.raw_ops.Assign(ref=self._ref(), value=value, use_locking=use_locking).op

    def assign_add(self, value, use_locking):
        """Builds an addition of `value` to the variable; returns the op."""
        if self.kind == "resource":
            return tf.raw_ops.AssignAddVariableOp(resource=self._handle(), value=value)
        return tf.raw_ops.AssignAdd(ref=self._ref(), value=value, use_locking=use_locking).op

    def assign_sub(self, value, use_locking):
        """Builds a subtraction of `value` from the variable; returns the op."""
        if self.kind == "resource":
            return tf.raw_ops.AssignSubVariableOp(resource=self._handle(), value=value)
        return tf.raw_ops.AssignSub(ref=self._ref(), value=value, use_locking=use_locking).op

    def subtract_scaled(self, scale, delta, use_locking):
        """Builds `variable -= scale * delta` with the module's `subtract_scaled` (one
        kernel, the product rounded first); returns the op."""
        target = self._handle() if self.kind == "resource" else self._ref()
        return subtract_scaled(self.kind, target, scale, delta, use_locking)

    def _handle(self):
        return tf.raw_ops.VarHandleOp(
            dtype=self.dtype,
            shape=self.shape,
            container=self.container,
            shared_name=self.shared_name,
        )

    def _ref(self):
        return tf.raw_ops.VariableV2(
            shape=self.shape,
            dtype=self.dtype,
            container=self.container,
            shared_name=self.shared_name,
        )
