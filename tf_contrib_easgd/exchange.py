"""The elastic exchange, built so that a step that does not exchange touches no remote device.

Why not a plain `tf.cond` around ops on the parameter server: a TF1 session prunes the graph
of a `session.run` to what the fetches need and splits it into one partition per task, and
every partition runs on every step. Ops of the exchange placed on a parameter server put a
ps partition in the train op's graph: each step then costs a RunGraph RPC to every ps task
plus one RecvTensor RPC per cross-device edge (one per variable and direction, dead or
live), even though `tf.cond` skips the exchange 9 steps out of 10.

Here the train op's graph has no op on a parameter server at all. Each ps task that holds
centres gets a function that does that task's half of the exchange where the centres live:

    for each centre c with worker value x:   read c;  d = alpha * (x - c);  c += d
    then, if `global_step` lives on that task:   global_step += 1
    return the values of c read

The worker calls it with an op on the worker, one of two (transport.py chooses per session):
a `RemoteCall` (TF's remote function call: the worker's function runtime registers the
function with the ps task once, then sends the arguments and receives the results in one
RunGraph RPC), or a `StatefulPartitionedCall` of the same function pinned to the ps task
(the function runtime runs its ps part there and moves the tensors by Send/Recv). Either
sits behind one worker-local Switch (`run_if`); on a step that does not exchange it is
skipped and nothing is sent: the step's graph is one partition, on the worker. On an
exchange step the worker sends each ps task the values of its centres and receives the
centres: about 2 x parameters x 4 bytes per exchange for float32. The
worker then sets its local centres to the returned values and applies the same
`d = alpha * (x - c)` to its own copies (the same float operations on the same inputs, so
both sides move by exactly the same d).

The function finds a centre by the variable's container and shared name, as the variable
op on the ps does, so it reaches the same variable in both variable worlds: a
`VarHandleOp` for resource variables (TF 2 graph mode), a `VariableV2` op for ref variables
(TF1 mode). Centres on the worker's own task, on an unspecified device, or of a kind this
module cannot address take the plain path: the same arithmetic with ordinary ops.

Ordering: the calls to several ps tasks go one after the other, and a ps task increments
`global_step` after moving its own centres.

In-process clusters: the first call of a worker waits, on a thread of the worker's inter-op
pool, until the ps task has registered the function. When the ps and the workers are
servers in one process (in-process test clusters), they share one process-wide pool, as
many threads as cores by default; as many first calls at once as there are threads leave
the ps no thread to register with, and the job deadlocks. Such processes need a larger pool
(`TF_NUM_INTEROP_THREADS`, e.g. 16, set before the first server starts). A job with one
process per task is not affected: each has its own pool.

Cost: `RemoteCall` carries tensors as protobuf fields of the RunGraph messages, which copies
them more often than the RecvTensor path of a ps partition does; the direct call uses that
RecvTensor path, and costs about what ops on the ps would on an exchange step, while every
other step is free of RPCs (see BENCHMARKS.md).
"""

import dataclasses
import typing

import tensorflow as tf

_RESOURCE_VARIABLE_OPS = ("VarHandleOp",)
_REF_VARIABLE_OPS = ("VariableV2", "Variable")


@dataclasses.dataclass
class _TaskGroup:
    """The centres (and maybe the global step) held by one task.

    Attributes:
        target: the task's device name, e.g. "/job:ps/replica:0/task:0"; None for the
            worker's own task or an unknown place (the plain path).
        entries: the `CenteredVariable`s whose global centre lives on the task.
        global_step: the global step if it lives on the task, else None.
    """

    target: str | None
    entries: list = dataclasses.field(default_factory=list)
    global_step: tf.Variable | None = None


class ElasticExchange:
    """Builds the elastic exchange of one worker, one remote call per parameter server task.

    Construct it outside any control-flow context (it defines the ps-side functions), then
    call it as the branch of `run_if` that runs on exchange steps.
    """

    def __init__(
        self, centered, worker_device, moving_rate, global_step, use_locking, transport=None
    ):
        """Groups the centres by task and defines the functions of each parameter server task.

        Args:
            centered: the `CenteredVariable`s to exchange.
            worker_device: device string of this worker.
            moving_rate: the elastic rate alpha, a Python float.
            global_step: a variable to increment once per exchange, or None.
            use_locking: whether the updates take locks.
            transport: the `transport.ExchangeTransport` that chooses how calls go; None:
                always by `RemoteCall`.
        """
        self._worker_device = worker_device
        self._transport = transport
        self._moving_rate = moving_rate
        self._use_locking = use_locking
        self._global_step = global_step
        worker = tf.DeviceSpec.from_string(worker_device or "")
        groups = {}
        for entry in centered:
            target = _remote_target(entry.global_center, worker)
            groups.setdefault(target, _TaskGroup(target)).entries.append(entry)
        if global_step is not None:
            target = _remote_target(global_step, worker)
            groups.setdefault(target, _TaskGroup(target)).global_step = global_step
        self._local = groups.pop(None, _TaskGroup(None))
        self._remote = list(groups.values())
        # Per task: (the function a RemoteCall runs there, the same pinned to the task for
        # a direct call; see transport.py).
        self._functions = {}
        for index, group in enumerate(self._remote):
            self._functions[group.target] = (
                self._define_task_function(group, index, None),
                self._define_task_function(group, index, group.target)
                if transport is not None
                else None,
            )
        if transport is not None:
            # The probe asks each task whether the first variable this exchange needs there
            # is initialised: only the task itself can say yes (transport.py).
            transport.add_targets(
                {
                    group.target: _VariableAddress.of(
                        group.entries[0].global_center if group.entries else group.global_step
                    )
                    for group in self._remote
                }
            )

    @property
    def remote_targets(self):
        """The tasks this exchange calls, in call order."""
        return [group.target for group in self._remote]

    def __call__(self):
        """Builds the exchange in the current context; returns a bool tensor, True when done."""
        updates = []
        with tf.compat.v1.device(self._worker_device):
            gates = None
            if self._remote and self._transport is not None:
                gates = _CallGates(*branch_gates(self._transport.is_direct()))
            for group in self._remote:
                # One call at a time: each waits for the previous one.
                with tf.control_dependencies(updates[-1:]):
                    updates += self._call_task(group, gates)
        updates += self._plain_exchange(self._local.entries)
        if self._local.global_step is not None:
            with (
                tf.control_dependencies(updates),
                tf.compat.v1.device(self._local.global_step.device),
            ):
                updates.append(
                    tf.compat.v1.assign_add(
                        self._local.global_step, 1, use_locking=self._use_locking
                    ).op
                )
        with tf.control_dependencies(updates):
            return tf.constant(True)

    def _define_task_function(self, group, index, device):
        """Defines the ps-side half of the exchange of `group` as a concrete function.

        Args:
            group: the `_TaskGroup`.
            index: its position, for the function's name.
            device: None for the function a `RemoteCall` runs on the task (placed there);
                the task's device for a direct call, which places the ops on the task.
        """
        rate = self._moving_rate
        use_locking = self._use_locking
        centres = [_VariableAddress.of(entry.global_center) for entry in group.entries]
        step = None if group.global_step is None else _VariableAddress.of(group.global_step)

        def exchange_on_task(*inputs):
            # Inputs: the worker values of the centres, then the step increment if any.
            # Outputs: the centres as read, then the global step as read if any (RemoteCall
            # takes and returns at least one tensor).
            with tf.compat.v1.device(device):
                read, moved = [], []
                for address, value in zip(centres, inputs, strict=False):
                    centre, move = address.read_and_add(
                        lambda c, x=value: tf.cast(rate, c.dtype) * (x - c), use_locking
                    )
                    read.append(centre)
                    moved.append(move)
                if step is not None:
                    with tf.control_dependencies(moved):
                        count, increment = step.read_and_add(lambda _: inputs[-1], use_locking)
                    read.append(count)
                    moved.append(increment)
                with tf.control_dependencies(moved):
                    return [tf.identity(value) for value in read]

        exchange_on_task.__name__ = f"easgd_exchange_task_{index}"
        if device is not None:
            exchange_on_task.__name__ += "_direct"
        signature = [
            tf.TensorSpec(entry.worker.shape, entry.worker.dtype.base_dtype)
            for entry in group.entries
        ]
        if step is not None:
            signature.append(tf.TensorSpec([], step.dtype))
        return define_function(exchange_on_task, signature, noinline=device is not None)

    def _call_task(self, group, gates):
        """Builds the call of `group` and the worker's half; returns the update ops.

        Args:
            group: the `_TaskGroup` of a ps task.
            gates: None to call by `RemoteCall` only; else the `_CallGates` that choose.
        """
        values = [tf.identity(entry.worker.read_value()) for entry in group.entries]
        inputs = list(values)
        if group.global_step is not None:
            inputs.append(tf.ones([], group.global_step.dtype.base_dtype))
        remote_call_function, direct_function = self._functions[group.target]
        name = _call_name(group.target)
        types = [value.dtype for value in inputs]
        if gates is None:
            outputs = tf.raw_ops.RemoteCall(
                target=group.target, args=inputs, Tout=types, f=remote_call_function, name=name
            )
        else:
            # The call not taken is dead; each Merge passes on the output of the other.
            with tf.control_dependencies([gates.remote_call]):
                by_remote_call = tf.raw_ops.RemoteCall(
                    target=group.target, args=inputs, Tout=types, f=remote_call_function, name=name
                )
            with tf.control_dependencies([gates.direct_call]):
                by_direct_call = tf.raw_ops.StatefulPartitionedCall(
                    args=inputs, Tout=types, f=direct_function, name=f"{name}_direct"
                )
            outputs = [
                tf.raw_ops.Merge(inputs=[a, b])[0]
                for a, b in zip(by_remote_call, by_direct_call, strict=True)
            ]
        updates = []
        for entry, value, centre in zip(group.entries, values, outputs, strict=False):
            centre.set_shape(value.shape)
            refresh = tf.compat.v1.assign(entry.local_center, centre, use_locking=self._use_locking)
            delta = tf.cast(self._moving_rate, value.dtype) * (value - centre)
            move = tf.compat.v1.assign_sub(entry.worker, delta, use_locking=self._use_locking)
            updates += [refresh.op, move.op]
        return [*updates, outputs[-1].op]  # The call last: the next one waits for it.

    def _plain_exchange(self, entries):
        """The exchange with ordinary ops, for centres the worker reaches without a call."""
        updates = []
        for entry in entries:
            with tf.compat.v1.device(self._worker_device):
                centre = tf.identity(entry.global_center.read_value())
                refresh = tf.compat.v1.assign(
                    entry.local_center, centre, use_locking=self._use_locking
                )
                with tf.control_dependencies([refresh]):
                    rate = tf.cast(self._moving_rate, centre.dtype)
                    delta = rate * (entry.worker.read_value() - centre)
                move_worker = tf.compat.v1.assign_sub(
                    entry.worker, delta, use_locking=self._use_locking
                )
            with tf.compat.v1.device(entry.global_center.device):
                move_centre = tf.compat.v1.assign_add(
                    entry.global_center, delta, use_locking=self._use_locking
                )
            updates += [move_worker.op, move_centre.op]
        return updates


class _CallGates(typing.NamedTuple):
    """The two sides of the Switch that picks the transport: only one is alive per step."""

    remote_call: tf.Tensor  # Alive when the exchange calls by RemoteCall.
    direct_call: tf.Tensor  # Alive when it calls directly.


@dataclasses.dataclass(frozen=True)
class _VariableAddress:
    """How a function running on a variable's task finds the variable: its kind and names."""

    kind: str  # "resource" or "ref"
    container: str
    shared_name: str
    dtype: tf.DType
    shape: tf.TensorShape

    @classmethod
    def of(cls, variable):
        op = variable.op
        kind = "resource" if op.type in _RESOURCE_VARIABLE_OPS else "ref"
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

    def read_and_add(self, delta_of, use_locking):
        """Reads the variable, then adds `delta_of(value)` to it.

        Returns:
            (the value read, a copy unaffected by the addition; the addition op).
        """
        if self.kind == "resource":
            handle = self._handle()
            # The addition copies the buffer while this read still holds it (copy on write).
            value = tf.raw_ops.ReadVariableOp(resource=handle, dtype=self.dtype)
            add = tf.raw_ops.AssignAddVariableOp(resource=handle, value=delta_of(value))
            return value, add
        ref = self._ref()
        value = tf.raw_ops.Snapshot(input=ref)  # A copy: AssignAdd updates `ref` in place.
        add = tf.raw_ops.AssignAdd(ref=ref, value=delta_of(value), use_locking=use_locking)
        return value, add.op

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


#: What TensorFlow's executor writes into the `InternalError` it raises instead of the
#: `UnavailableError` of a non-communication op (a `RemoteCall` is one).
_REWRITTEN_UNAVAILABLE = "originally returned UnavailableError"


def is_recoverable_error(error):
    """Whether `error` means a task was lost, so a new session may go on once it is back.

    `MonitoredTrainingSession` recovers by itself from `AbortedError` and
    `UnavailableError`. An exchange step that finds its parameter server gone fails in its
    call (`RemoteCall` or direct), and TensorFlow's executor rewrites the `UnavailableError`
    of any op other than Send/Recv into an `InternalError` ("... originally returned
    UnavailableError, and was replaced by InternalError ..."), which the session does not
    recover from; this
    function recognises it too. A training loop catches such an error outside the session,
    waits until the parameter servers answer, and creates the session again (the chief
    then restores the centre from its latest checkpoint if the ps lost it).

    Args:
        error: an exception.

    Returns:
        True for `tf.errors.AbortedError`, `tf.errors.UnavailableError` and a rewritten
        `UnavailableError`; False otherwise.
    """
    if isinstance(error, (tf.errors.AbortedError, tf.errors.UnavailableError)):
        return True
    return isinstance(error, tf.errors.InternalError) and _REWRITTEN_UNAVAILABLE in str(error)


def run_if(pred, build, name="run_if"):
    """Runs every op that `build()` makes only when the scalar bool `pred` is true.

    This is the gating of a v1 `tf.cond` with one `Switch` for the whole branch: `build()`
    runs under a control dependency on the Switch's true side, so when `pred` is false each
    of its ops is dead (skipped), whatever its other inputs. `tf.cond` would instead switch
    every tensor the branch captures (one Switch per variable read or written) in TF1, and
    inline a branch function with further Identity nodes per input in TF2; this costs the
    same in both variable worlds and stays on the device of `pred`.

    Args:
        pred: a scalar bool tensor.
        build: a callable taking no argument that builds the branch and returns a scalar
            bool tensor that is ready when the branch is done.
        name: name scope of the gating ops.

    Returns:
        A scalar bool tensor, ready on every step: False when the branch did not run, the
        value of `build()` when it did.
    """
    with tf.name_scope(name):
        skipped, taken = branch_gates(pred)
        with tf.control_dependencies([taken]):
            done = build()
        output, _ = tf.raw_ops.Merge(inputs=[skipped, done])
        return output


def branch_gates(pred):
    """One `Switch` on the scalar bool `pred`, as two tensors to hang ops on by control
    dependency: ops that depend on the first run only when `pred` is false, ops that depend
    on the second only when it is true (the other side is dead, and so is all that depends
    on it).

    Returns:
        (alive when `pred` is false, alive when `pred` is true).
    """
    when_false, when_true = tf.raw_ops.Switch(data=pred, pred=pred)
    return tf.identity(when_false, name="when_false"), tf.identity(when_true, name="when_true")


def define_function(python_function, signature, noinline=False):
    """Traces `python_function` once and adds it to the default graph's function library.

    Args:
        python_function: builds the body; its `__name__` names the function.
        signature: the `tf.TensorSpec`s of its arguments.
        noinline: mark it `_noinline`. A function called with `StatefulPartitionedCall`
            whose ops live on a parameter server needs it: a session would otherwise inline
            the call into the step's graph and give every step a ps partition. (A
            `RemoteCall` refuses such a function.)

    Returns:
        The concrete function.
    """
    attributes = {"_noinline": True} if noinline else None
    with tf.compat.v1.device(None):
        function = tf.function(
            python_function, autograph=False, experimental_attributes=attributes
        ).get_concrete_function(*signature)
        function.add_to_graph(tf.compat.v1.get_default_graph())
    return function


def _call_name(target):
    """A readable op name for the call to `target`, e.g. "exchange_with_ps_1"."""
    spec = tf.DeviceSpec.from_string(target)
    return f"exchange_with_{spec.job}_{spec.task}"


def _remote_target(variable, worker):
    """The task to call for `variable`, or None when the plain exchange reaches it.

    Args:
        variable: a global centre or the global step.
        worker: the worker's `tf.DeviceSpec`.

    Returns:
        A device name such as "/job:ps/replica:0/task:1", or None if the variable has no
        job in its device, lives on the worker's own task, or is of a kind the remote
        function cannot address.
    """
    if variable.op.type not in _RESOURCE_VARIABLE_OPS + _REF_VARIABLE_OPS:
        return None
    spec = tf.DeviceSpec.from_string(variable.device or "")
    if spec.job is None:
        return None
    task = (spec.job, spec.replica or 0, spec.task or 0)
    if task == (worker.job, worker.replica or 0, worker.task or 0):
        return None
    return f"/job:{task[0]}/replica:{task[1]}/task:{task[2]}"
