"""The elastic exchange of one worker: a call per parameter server task that holds centres.

`ElasticExchange` builds what an exchange step runs: for each such task one call op on the
worker, of a function that does both halves of the exchange with that task, and one more
for the centres the worker reaches without a call. A step that does not exchange skips
those few ops and runs nothing on a parameter server. docs/DESIGN.md ("The exchange").
"""

import typing

import tensorflow as tf

from tf_contrib_easgd.exchange import wire as wire_format
from tf_contrib_easgd.exchange.gating import branch_gates
from tf_contrib_easgd.exchange.graph_functions import call_function, define_function, return_after
from tf_contrib_easgd.exchange.halves import ExchangeHalves, TaskHalf, elastic_difference
from tf_contrib_easgd.exchange.task_groups import group_by_task
from tf_contrib_easgd.exchange.variable_address import VariableAddress, is_addressable


class _TaskCalls(typing.NamedTuple):
    """The worker's whole exchange with one task, as a function per transport (transport.py).

    Attributes:
        remote_call: calls the task's half by `RemoteCall`.
        direct_call: holds the task's half itself, pinned to the task; None without a
            transport (then every call goes by `RemoteCall`).
    """

    remote_call: object
    direct_call: object


class _CallGates(typing.NamedTuple):
    """The two sides of the Switch that picks the transport: only one is alive per step."""

    remote_call: tf.Tensor  # Alive when the exchange calls by RemoteCall.
    direct_call: tf.Tensor  # Alive when it calls directly.


class ElasticExchange(ExchangeHalves):
    """Builds the elastic exchange of one worker, one remote call per parameter server task.

    Construct it outside any control-flow context (it defines the ps-side functions), then
    call it as the branch of `run_if` that runs on exchange steps: it builds its ops on the
    worker's device, but the plain path's moves of the centres.

    Each variable's exchange through a call has two halves, built by `_move_centre` (on the
    task) and `_move_worker` (on the worker); both move by the same
    d = alpha * (value - centre), to the bit. A subclass may override the two halves (the
    benchmarks' copy-only exchange does). With a 16-bit `wire`, the values of float
    variables cross as differences from a reference both sides hold (wire.py), and
    `_wire_centre_half` / `_wire_worker_half` build the halves instead.
    """

    #: Private: chain the calls of the ps tasks one after the other, as the exchange did
    #: before its calls went in flight together (benchmarks/scale.py measures both).
    _serial_calls = False

    def __init__(
        self,
        centered,
        worker_device,
        moving_rate,
        global_step,
        use_locking,
        transport=None,
        wire=None,
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
            wire: a `wire.Wire` to send the values of the centres on other tasks in 16
                bits; None sends them at full width.
        """
        self._worker_device = worker_device
        self._transport = transport
        self._moving_rate = moving_rate
        self._use_locking = use_locking
        self._wire = wire
        self._local, self._remote = group_by_task(centered, global_step, worker_device)
        # Made here, outside the functions that use them: one per centre sent narrowed.
        self._references = {
            entry.global_center.name: wire.reference(entry)
            for group in self._remote
            for entry in group.entries
            if self._narrows(entry)
        }
        self._calls = {
            group.target: self._define_task_calls(group, index)
            for index, group in enumerate(self._remote)
        }
        # The exchange of the centres the worker reaches without a call, as one function
        # too when it can find every variable by name; else with ordinary ops.
        self._local_function = None
        if self._local_variables_addressable():
            self._local_function = self._define_local_function()
        if transport is not None:
            # The probe asks each task whether the first variable this exchange needs there
            # is initialised: only the task itself can say yes (transport.py).
            transport.add_targets(self._probe_addresses())

    @property
    def remote_targets(self):
        """The tasks this exchange calls, in call order."""
        return [group.target for group in self._remote]

    @property
    def local_centres(self):
        """The global centres this exchange reaches without a call: on the worker's own
        task, unplaced, or of a kind no function can address."""
        return [entry.global_center for entry in self._local.entries]

    def __call__(self):
        """Builds the exchange in the current context; returns a bool tensor, True when done."""
        with tf.compat.v1.device(self._worker_device):
            updates = self._call_tasks()
            updates += self._exchange_locally(updates)
        with tf.control_dependencies(updates):
            return tf.constant(True)

    # Building the exchange step.

    def _call_tasks(self):
        """Builds the calls of the ps tasks; returns their done tensors (the exchange ends
        when the last one is ready).

        Direct calls are all in flight together: a variable lives on one task, so the order
        across tasks changes no move. `RemoteCall`s go one after the other: TensorFlow's
        runtime aborts the process now and then (`std::length_error`, or SIGSEGV) when one
        step starts `RemoteCall`s to several targets at once (docs/DESIGN.md, "Every ps task at
        once"). `_serial_calls` (the benchmarks' serial form, to measure against) chains
        the direct calls too.
        """
        gates = None
        if self._remote and self._transport is not None:
            gates = _CallGates(*branch_gates(self._transport.is_direct()))
        done, remote_calls = [], []
        for group in self._remote:
            after = done[-1:] if self._serial_calls else []
            done.append(self._call_task(group, gates, after, remote_calls))
        return done

    def _call_task(self, group, gates, after, remote_calls):
        """Builds the call of the worker's exchange with `group`; returns its done tensor.

        Args:
            group: the `TaskGroup` of a ps task.
            gates: None to call by `RemoteCall` only; else the `_CallGates` that choose.
            after: tensors the call waits for (the previous call, in the serial form).
            remote_calls: the done tensors of the `RemoteCall`s built so far; the new one
                waits for the last and is appended.
        """
        calls = self._calls[group.target]
        name = _call_name(group.target)
        if gates is None:
            with tf.control_dependencies(after + remote_calls[-1:]):
                remote_calls.append(call_function(calls.remote_call, name))
            return remote_calls[-1]
        # The call not taken is dead; the Merge passes on the output of the other.
        with tf.control_dependencies([gates.remote_call, *after, *remote_calls[-1:]]):
            remote_calls.append(call_function(calls.remote_call, name))
        with tf.control_dependencies([gates.direct_call, *after]):
            direct_call_done = call_function(calls.direct_call, f"{name}_direct")
        done, _ = tf.raw_ops.Merge(inputs=[remote_calls[-1], direct_call_done])
        return done

    def _exchange_locally(self, after):
        """Builds the exchange of the centres the worker reaches without a call; returns its
        ops. The call of `exchange_locally` waits for the ops of `after` (the calls of the
        ps tasks), as does the plain path's increment of the global step."""
        if self._local_function is not None:
            with tf.control_dependencies(after):
                return [call_function(self._local_function, "exchange_locally")]
        updates = self._plain_exchange(self._local.entries)
        global_step = self._local.global_step
        if global_step is not None:
            with (
                tf.control_dependencies(after + updates),
                tf.compat.v1.device(global_step.device),
            ):
                updates.append(
                    tf.compat.v1.assign_add(global_step, 1, use_locking=self._use_locking).op
                )
        return updates

    def _plain_exchange(self, entries):
        """The exchange with ordinary ops, for centres the worker reaches without a call but
        no function can find by name; built on the worker's device, but the centres' moves."""
        updates = []
        for entry in entries:
            centre = tf.identity(entry.global_center.read_value())
            refresh = tf.compat.v1.assign(entry.local_center, centre, use_locking=self._use_locking)
            with tf.control_dependencies([refresh]):
                delta = elastic_difference(self._moving_rate, entry.worker.read_value(), centre)
            move_worker = tf.compat.v1.assign_sub(
                entry.worker, delta, use_locking=self._use_locking
            )
            with tf.compat.v1.device(entry.global_center.device):
                move_centre = tf.compat.v1.assign_add(
                    entry.global_center, delta, use_locking=self._use_locking
                )
            updates += [move_worker.op, move_centre.op]
        return updates

    # Defining the functions (at construction, outside any control-flow context).

    def _define_task_calls(self, group, index):
        """Defines the task's half of the exchange with `group` and the worker's whole
        exchange with it, by either transport; returns the `_TaskCalls`."""
        task_function = self._define_task_function(group, index)
        return _TaskCalls(
            self._define_worker_function(group, index, task_function),
            self._define_worker_function(group, index, None)
            if self._transport is not None
            else None,
        )

    def _define_task_function(self, group, index):
        """Defines the function a `RemoteCall` runs on the task of `group` (its half)."""
        signature = [
            tf.TensorSpec(entry.worker.shape, self._sent_dtype(entry)) for entry in group.entries
        ]
        if group.global_step is not None:
            signature.append(tf.TensorSpec([], group.global_step.dtype.base_dtype))

        def exchange_on_task(*inputs):
            half = self._task_half(group, inputs, None)
            return return_after(half.updates, half.replies)

        exchange_on_task.__name__ = f"easgd_exchange_task_{index}"
        return define_function(exchange_on_task, signature)

    def _define_worker_function(self, group, index, task_function):
        """Defines the worker's whole exchange with the task of `group` as one function.

        The step's graph then holds one call op per task and transport: on a step that
        does not exchange, only those few ops are skipped, however many variables move.
        The function finds the worker's variables by their names, as the task's half finds
        the centres (`VariableAddress`).

        Args:
            group: the `TaskGroup`.
            index: its position, for the function's name.
            task_function: the task's half to run there by `RemoteCall`; None for a direct
                call, whose function holds the task's half itself, pinned to the task.

        Returns:
            The concrete function, `_noinline` (a session would otherwise inline it, and a
            direct call's ps ops would give every step a ps partition).
        """
        workers = [VariableAddress.of(entry.worker) for entry in group.entries]
        local_centres = [VariableAddress.of(entry.local_center) for entry in group.entries]
        narrowed = [self._narrows(entry) for entry in group.entries]

        def exchange_with_task():
            with tf.compat.v1.device(self._worker_device):
                values = [
                    wire_format.encode(worker.read(), local_centre.read(), self._wire.dtype)
                    if narrows
                    else worker.read()
                    for worker, local_centre, narrows in zip(
                        workers, local_centres, narrowed, strict=True
                    )
                ]
                inputs = list(values)
                if group.global_step is not None:
                    inputs.append(tf.ones([], group.global_step.dtype.base_dtype))
                if task_function is None:
                    # The centres come back while the values go out (docs/DESIGN.md,
                    # "Both ways at once"); the worker moves once the task has its values,
                    # which a ref variable's reads would otherwise still share.
                    half = self._task_half(group, inputs, group.target)
                else:
                    # A RemoteCall returns when the task's function has ended.
                    outputs = tf.raw_ops.RemoteCall(
                        target=group.target,
                        args=inputs,
                        Tout=[value.dtype for value in inputs],
                        f=task_function,
                    )
                    half = TaskHalf(outputs, [outputs[-1].op])
                updates = []
                with tf.control_dependencies(half.updates):
                    for worker, local_centre, value, centre, narrows in zip(
                        workers, local_centres, values, half.replies, narrowed, strict=False
                    ):
                        centre.set_shape(value.shape)
                        move = self._wire_worker_half if narrows else self._move_worker
                        updates += move(worker, local_centre, value, centre)
                return return_after([*updates, *half.updates], [tf.constant(True)])

        exchange_with_task.__name__ = f"easgd_exchange_with_task_{index}"
        if task_function is None:
            exchange_with_task.__name__ += "_direct"
        return define_function(exchange_with_task, [], noinline=True)

    def _local_variables_addressable(self):
        """Whether the exchange without a call has variables, and a function finds them all
        by name."""
        variables = self._local.variables()
        return bool(variables) and all(map(is_addressable, variables))

    def _define_local_function(self):
        """Defines the exchange of the centres the worker reaches without a call (its own
        task's, or unplaced) as one `_noinline` function, like the calls: a step that does
        not exchange then skips one op. Every variable is found by name; both halves of
        each variable's exchange are here, with one d."""
        use_locking = self._use_locking
        entries = [
            (
                VariableAddress.of(entry.worker),
                VariableAddress.of(entry.local_center),
                VariableAddress.of(entry.global_center),
                entry.global_center.device,
            )
            for entry in self._local.entries
        ]
        global_step = self._local.global_step
        step = None if global_step is None else VariableAddress.of(global_step)

        def exchange_locally():
            moved = []
            for worker, local_centre, global_centre, centre_device in entries:
                with tf.compat.v1.device(centre_device):
                    centre = global_centre.read(copy=True)
                with tf.compat.v1.device(self._worker_device):
                    delta = elastic_difference(self._moving_rate, worker.read(), centre)
                    moved += self._update_worker(worker, local_centre, centre, delta)
                with tf.compat.v1.device(centre_device):
                    moved.append(global_centre.assign_add(delta, use_locking))
            if step is not None:
                with tf.control_dependencies(moved), tf.compat.v1.device(global_step.device):
                    moved.append(step.assign_add(tf.ones([], step.dtype), use_locking))
            return return_after(moved, [tf.constant(True)])

        exchange_locally.__name__ = "easgd_exchange_locally"
        return define_function(exchange_locally, [], noinline=True)

    def _probe_addresses(self):
        """For each task called, the first variable the exchange needs there."""
        return {
            group.target: VariableAddress.of(
                group.entries[0].global_center if group.entries else group.global_step
            )
            for group in self._remote
        }

    # The arithmetic of one variable's exchange.

    def _narrows(self, entry):
        """Whether `entry`'s values cross the wire as 16-bit differences."""
        return self._wire is not None and self._wire.narrows(entry.worker)

    def _sent_dtype(self, entry):
        """The dtype in which `entry`'s value crosses the wire."""
        return self._wire.dtype if self._narrows(entry) else entry.worker.dtype.base_dtype


def _call_name(target):
    """A readable op name for the call to `target`, e.g. "exchange_with_ps_1"."""
    spec = tf.DeviceSpec.from_string(target)
    return f"exchange_with_{spec.job}_{spec.task}"
