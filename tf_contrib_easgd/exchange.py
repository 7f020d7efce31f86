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

The worker's whole exchange with one task is a function too, called by one op on the
worker: it reads the worker's values, calls the task's half, sets the local centres to the
centres returned and applies the same `d = alpha * (x - c)` to the worker's copies (the
same float operations on the same inputs, so both sides move by exactly the same d). It
comes in two kinds (transport.py chooses one per session): one calls the task's half by a
`RemoteCall` (TF's remote function call: the worker's function runtime registers that
function with the ps task once, then sends the arguments and receives the results in one
RunGraph RPC); the other holds the task's half itself, pinned to the ps task, and the
function runtime runs that part there and moves the tensors by Send/Recv. Both calls sit
behind one worker-local Switch (`run_if`); on a step that does not exchange they are
skipped, and nothing is sent: the step's graph is one partition, on the worker, and its
skipped part is a few ops whatever the number of variables. On an exchange step the worker
sends each ps task the values of its centres and receives the centres: about
2 x parameters x 4 bytes per exchange for float32.

The functions find a variable by its container and shared name, as the variable op does,
so they reach the same variable in both variable worlds: a `VarHandleOp` for resource
variables (TF 2 graph mode), a `VariableV2` op for ref variables (TF1 mode). Centres on the
worker's own task or on an unspecified device need no call: their exchange is one more
function on the worker (`exchange_locally`). A variable of a kind these functions cannot
address takes the plain path: the same arithmetic with ordinary ops.

Ordering: the calls to several ps tasks go one after the other, then the worker's own
exchange; a task increments `global_step` after moving its own centres.

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
        # Per task: (the worker's whole exchange with it by `RemoteCall`, the same by a
        # direct call; see transport.py), each one `_noinline` function called by one op.
        self._functions = {}
        for index, group in enumerate(self._remote):
            task_function = self._define_task_function(group, index)
            self._functions[group.target] = (
                self._define_worker_function(group, index, task_function),
                self._define_worker_function(group, index, None) if transport is not None else None,
            )
        # The exchange of the centres the worker reaches without a call, as one function
        # too when it can find every variable by name; else with ordinary ops.
        self._local_function = None
        local_variables = [
            variable
            for entry in self._local.entries
            for variable in (entry.worker, entry.local_center, entry.global_center)
        ]
        if self._local.global_step is not None:
            local_variables.append(self._local.global_step)
        if local_variables and all(map(_is_addressable, local_variables)):
            self._local_function = self._define_local_function()
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
                    updates.append(self._call_task(group, gates))
        if self._local_function is not None:
            with tf.control_dependencies(updates), tf.compat.v1.device(self._worker_device):
                updates.append(_call(self._local_function, "exchange_locally"))
        else:
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

    def _task_half(self, group, inputs, device):
        """Builds the ps-side half of the exchange of `group`; returns the tensors to send back.

        Args:
            group: the `_TaskGroup`.
            inputs: the worker values of the centres, then the step increment if any.
            device: where to place the ops: None inside the function a `RemoteCall` runs
                (placed on the task by the call), the task's device in a direct call.

        Returns:
            The centres as read, then the global step as read if any (a `RemoteCall` takes
            and returns at least one tensor).
        """
        use_locking = self._use_locking
        centres = [_VariableAddress.of(entry.global_center) for entry in group.entries]
        with tf.compat.v1.device(device):
            read, moved = [], []
            for address, value in zip(centres, inputs, strict=False):
                centre = address.read(copy=True)
                read.append(centre)
                moved.append(self._move_centre(address, value, centre))
            if group.global_step is not None:
                step = _VariableAddress.of(group.global_step)
                with tf.control_dependencies(moved):
                    read.append(step.read(copy=True))
                    moved.append(step.assign_add(inputs[-1], use_locking))
            return _return_after(moved, read)

    def _define_task_function(self, group, index):
        """Defines the function a `RemoteCall` runs on the task of `group` (its half)."""
        signature = [
            tf.TensorSpec(entry.worker.shape, entry.worker.dtype.base_dtype)
            for entry in group.entries
        ]
        if group.global_step is not None:
            signature.append(tf.TensorSpec([], group.global_step.dtype.base_dtype))

        def exchange_on_task(*inputs):
            return self._task_half(group, inputs, None)

        exchange_on_task.__name__ = f"easgd_exchange_task_{index}"
        return define_function(exchange_on_task, signature)

    def _define_worker_function(self, group, index, task_function):
        """Defines the worker's whole exchange with the task of `group` as one function.

        The step's graph then holds one call op per task and transport: on a step that
        does not exchange, only those few ops are skipped, however many variables move.
        The function finds the worker's variables by their names, as the task's half finds
        the centres (`_VariableAddress`).

        Args:
            group: the `_TaskGroup`.
            index: its position, for the function's name.
            task_function: the task's half to run there by `RemoteCall`; None for a direct
                call, whose function holds the task's half itself, pinned to the task.

        Returns:
            The concrete function, `_noinline` (a session would otherwise inline it, and a
            direct call's ps ops would give every step a ps partition).
        """
        workers = [_VariableAddress.of(entry.worker) for entry in group.entries]
        local_centres = [_VariableAddress.of(entry.local_center) for entry in group.entries]

        def exchange_with_task():
            with tf.compat.v1.device(self._worker_device):
                values = [address.read() for address in workers]
                inputs = list(values)
                if group.global_step is not None:
                    inputs.append(tf.ones([], group.global_step.dtype.base_dtype))
                if task_function is None:
                    outputs = self._task_half(group, inputs, group.target)
                else:
                    outputs = tf.raw_ops.RemoteCall(
                        target=group.target,
                        args=inputs,
                        Tout=[value.dtype for value in inputs],
                        f=task_function,
                    )
                updates = []
                for worker, local_centre, value, centre in zip(
                    workers, local_centres, values, outputs, strict=False
                ):
                    centre.set_shape(value.shape)
                    updates += self._move_worker(worker, local_centre, value, centre)[1]
                return _return_after([*updates, outputs[-1].op], [tf.constant(True)])

        exchange_with_task.__name__ = f"easgd_exchange_with_task_{index}"
        if task_function is None:
            exchange_with_task.__name__ += "_direct"
        return define_function(exchange_with_task, [], noinline=True)

    def _define_local_function(self):
        """Defines the exchange of the centres the worker reaches without a call (its own
        task's, or unplaced) as one `_noinline` function, like the calls: a step that does
        not exchange then skips one op. Every variable is found by name."""
        use_locking = self._use_locking
        entries = [
            (
                _VariableAddress.of(entry.worker),
                _VariableAddress.of(entry.local_center),
                _VariableAddress.of(entry.global_center),
                entry.global_center.device,
            )
            for entry in self._local.entries
        ]
        global_step = self._local.global_step
        step = None if global_step is None else _VariableAddress.of(global_step)

        def exchange_locally():
            moved = []
            for worker, local_centre, global_centre, centre_device in entries:
                with tf.compat.v1.device(centre_device):
                    centre = global_centre.read(copy=True)
                with tf.compat.v1.device(self._worker_device):
                    delta, updates = self._move_worker(worker, local_centre, worker.read(), centre)
                moved += updates
                with tf.compat.v1.device(centre_device):
                    moved.append(global_centre.assign_add(delta, use_locking))
            if step is not None:
                with tf.control_dependencies(moved), tf.compat.v1.device(global_step.device):
                    moved.append(step.assign_add(tf.ones([], step.dtype), use_locking))
            return _return_after(moved, [tf.constant(True)])

        exchange_locally.__name__ = "easgd_exchange_locally"
        return define_function(exchange_locally, [], noinline=True)

    def _elastic_difference(self, value, centre):
        """Builds d = alpha * (value - centre): every move of an exchange builds it here, so
        that the worker and the centre move by the same float operations on the same
        inputs."""
        return tf.cast(self._moving_rate, centre.dtype) * (value - centre)

    def _move_centre(self, centre_address, value, centre):
        """Builds the ps half of the exchange of one variable in a function being traced:
        moves the centre by d = alpha * (value - centre); returns the update op.

        Args:
            centre_address: the `_VariableAddress` of the global centre.
            value: the worker's value that the exchange sent.
            centre: the centre as the exchange read it.
        """
        return centre_address.assign_add(self._elastic_difference(value, centre), self._use_locking)

    def _move_worker(self, worker, local_centre, value, centre):
        """Builds the worker's half of the exchange of one variable in a function being
        traced: sets the local centre to `centre` and moves the worker by
        d = alpha * (value - centre), the d that `_move_centre` moves the centre by the
        other way (`_elastic_difference`).

        Args:
            worker, local_centre: the `_VariableAddress`es of the worker's variable and of
                its local centre.
            value: the worker's value that the exchange sent.
            centre: the centre as the exchange read it.

        Returns:
            (d, the two update ops).
        """
        delta = self._elastic_difference(value, centre)
        use_locking = self._use_locking
        return delta, [
            local_centre.assign(centre, use_locking),
            worker.assign_sub(delta, use_locking),
        ]

    def _call_task(self, group, gates):
        """Builds the call of the worker's exchange with `group`; returns its done tensor.

        Args:
            group: the `_TaskGroup` of a ps task.
            gates: None to call by `RemoteCall` only; else the `_CallGates` that choose.
        """
        by_remote_call, by_direct_call = self._functions[group.target]
        name = _call_name(group.target)
        if gates is None:
            return _call(by_remote_call, name)
        # The call not taken is dead; the Merge passes on the output of the other.
        with tf.control_dependencies([gates.remote_call]):
            remote_call_done = _call(by_remote_call, name)
        with tf.control_dependencies([gates.direct_call]):
            direct_call_done = _call(by_direct_call, f"{name}_direct")
        done, _ = tf.raw_ops.Merge(inputs=[remote_call_done, direct_call_done])
        return done

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
                    delta = self._elastic_difference(entry.worker.read_value(), centre)
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


def _return_after(updates, outputs):
    """Ends the body of a function being traced: returns `outputs` once every op of `updates`
    has run, and makes every call run `updates` whatever the caller uses of its outputs.

    `tf.function` lists a function's stateful ops as its control outputs, which a session
    runs even when the caller uses no output; it leaves out the updates of ref variables
    (`Assign`, `AssignAdd`, `AssignSub` are not stateful ops). A call whose output only a
    control dependency uses would then lose them: the session's optimizer prunes an unused
    output with all that only it needs. This lists them too.

    Args:
        updates: the operations of the body that change state.
        outputs: the tensors to return.

    Returns:
        A list of identities of `outputs` that wait for `updates`.
    """
    graph = tf.compat.v1.get_default_graph()
    graph.control_outputs.extend(op for op in updates if not op.op_def.is_stateful)
    with tf.control_dependencies(updates):
        return [tf.identity(output) for output in outputs]


def _call(function, name):
    """Builds a call of an exchange function (no argument, one bool output); returns the
    output, True once the exchange is done."""
    (done,) = tf.raw_ops.StatefulPartitionedCall(args=[], Tout=[tf.bool], f=function, name=name)
    return done


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
    if not _is_addressable(variable):
        return None
    spec = tf.DeviceSpec.from_string(variable.device or "")
    if spec.job is None:
        return None
    task = (spec.job, spec.replica or 0, spec.task or 0)
    if task == (worker.job, worker.replica or 0, worker.task or 0):
        return None
    return f"/job:{task[0]}/replica:{task[1]}/task:{task[2]}"


def _is_addressable(variable):
    """Whether a function can find `variable` by name (`_VariableAddress`)."""
    return variable.op.type in _RESOURCE_VARIABLE_OPS + _REF_VARIABLE_OPS
