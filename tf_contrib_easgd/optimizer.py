"""ElasticAverageOptimizer: asynchronous Elastic Averaging SGD on tf.compat.v1.

It ties the library's pieces into the local step, the exchange every tau steps, the start
from the centre and the swapping saver. docs/DESIGN.md ("The library, wing by wing").
"""

import tensorflow as tf

from tf_contrib_easgd import _validation
from tf_contrib_easgd._contrib_attributes import ContribAttributes
from tf_contrib_easgd.custom_getter import (
    ElasticAverageCustomGetter,
    create_as_local_variable,
    flatten_partitions,
)
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange
from tf_contrib_easgd.exchange.gating import run_every
from tf_contrib_easgd.exchange.overlap import OverlappedExchange
from tf_contrib_easgd.exchange.transport import ExchangeTransport
from tf_contrib_easgd.exchange.wire import Wire, check_wire_dtype
from tf_contrib_easgd.hook import ElasticAverageOptimizerHook
from tf_contrib_easgd.penalty import GRADIENT, ElasticPenalty
from tf_contrib_easgd.startup import build_init_op
from tf_contrib_easgd.swapping_saver import swapping_saver

_LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
_GATE_OP = tf.compat.v1.train.Optimizer.GATE_OP


class ElasticAverageOptimizer(ContribAttributes, tf.compat.v1.train.Optimizer):
    """Wraps a `tf.compat.v1` optimizer to train with asynchronous Elastic Averaging SGD.

    Each worker trains its own copy x of the variables with the wrapped optimizer. Every
    `communication_period` (tau) local steps it and the centre x~ kept on the parameter
    servers move towards each other by the same d = alpha * (x - x~): x <- x - d,
    x~ <- x~ + d, alpha = `moving_rate` (docs/DESIGN.md, "Glossary"). Between exchanges an
    elastic penalty (`rho`, `penalty`) pulls x towards the centre as last read. With
    Nesterov momentum as the wrapped optimizer this is EAMSGD (Zhang, Choromanska and
    LeCun, "Deep learning with Elastic Averaging SGD", NIPS 2015).

    `global_step`, when given to `apply_gradients` or `minimize`, is incremented once per
    exchange, not per local step: it counts communication rounds summed over all workers
    (as contrib did), about W * L / tau for W workers of L local steps each.

    README.md ("Migrating from `tf.contrib.opt`") shows its use in a between-graph replicated
    TF1 script.
    """

    BETA = 0.9

    # The exchanges `_make_exchange` makes (a subclass may name others: the benchmarks' and
    # the tests' do).
    _exchange_class = ElasticExchange
    _overlapped_exchange_class = OverlappedExchange

    def __init__(
        self,
        opt,
        num_worker,
        ea_custom_getter,
        communication_period=10,
        moving_rate=None,
        rho=None,
        use_locking=True,
        synchronous=False,
        name="ElasticAverageOptimizer",
        *,
        penalty=GRADIENT,
        overlap=False,
        wire_dtype=None,
    ):
        """Creates the optimizer and its `local_step` variable on the worker.

        Args:
            opt: the `tf.compat.v1.train.Optimizer` that takes the local steps.
            num_worker: number of worker tasks, at least 1.
            ea_custom_getter: the `ElasticAverageCustomGetter` the variables were made with.
            communication_period: local steps between two exchanges with the centre (tau).
            moving_rate: the elastic rate alpha in (0, 1]; None means
                `BETA / communication_period / num_worker`.
            rho: strength of the pull of each worker copy x towards its local centre x~'
                (the centre as last read) between exchanges, >= 0; None means
                `moving_rate / learning_rate` of `opt`; 0.0 switches the pull off (the
                paper's asynchronous EASGD).
            use_locking: whether variable updates take locks.
            synchronous: whether `get_init_op` waits for all workers before training starts.
            name: name of the optimizer and prefix of the ops it makes.
            penalty: keyword only, how the pull is applied: "gradient" (contrib's form, the
                default) adds rho * sum(l2_loss(x - x~')) to the loss in
                `compute_gradients`, so the wrapped optimizer rescales the pull as it does
                gradients (with the default rho and an optimizer other than plain gradient
                descent, an `ElasticPenaltyWarning` says how); "move" (the paper's form)
                has `apply_gradients` also move x by -eta * rho * (x_t - x~'), read before
                the step, eta the learning rate of `opt` (with the default rho: by
                moving_rate, whatever the optimizer). docs/DESIGN.md ("The elastic
                penalty").
            overlap: keyword only; True overlaps each exchange with the next tau local
                steps: a queue runner sends it and its move lands on the worker at the next
                exchange (docs/DESIGN.md, "The overlapped exchange"). False: in the step.
            wire_dtype: keyword only; `tf.bfloat16` or `tf.float16` (or their names) sends
                what an exchange moves between a worker and a parameter server in 16 bits:
                differences from a reference both sides hold, of which each ps keeps a
                float32 copy per worker; the centre stays float32 (docs/DESIGN.md, "A
                16-bit wire"). None (or `tf.float32`), the default, sends float32 values.

        Raises:
            TypeError: if an argument has the wrong type (e.g. `opt` is a Keras optimizer).
            ValueError: if an argument is out of range; if the learning rate of `opt` is
                needed (the default `rho` with penalty="gradient", a positive `rho` with
                penalty="move") and cannot be read or is a constant <= 0; or if eager
                execution is enabled.
        """
        _validation.check_graph_mode(type(self).__name__)
        _validation.check_wrapped_optimizer(opt)
        _validation.check_instance(ea_custom_getter, ElasticAverageCustomGetter, "ea_custom_getter")
        num_worker = _validation.check_int(num_worker, "num_worker", 1)
        period = _validation.check_int(communication_period, "communication_period", 1)
        moving_rate = _validation.check_number(moving_rate, "moving_rate", low=0.0, high=1.0)
        rho = _validation.check_number(rho, "rho", low=0.0, low_inclusive=True)
        _validation.check_bool(use_locking, "use_locking")
        _validation.check_bool(synchronous, "synchronous")
        _validation.check_bool(overlap, "overlap")
        _validation.check_name(name, "name")
        wire_dtype = check_wire_dtype(wire_dtype)
        if moving_rate is None:
            moving_rate = self.BETA / period / num_worker
        elastic_penalty = ElasticPenalty(opt, penalty, rho, moving_rate, stacklevel=2)

        super().__init__(use_locking, name)
        self._opt = opt
        self._num_worker = num_worker
        self._getter = ea_custom_getter
        self._period = period
        self._moving_rate = moving_rate
        self._elastic_penalty = elastic_penalty
        self._synchronous = synchronous
        self._overlap = overlap
        self._overlapped = []  # The `OverlappedExchange` of each train op built.
        self._wire = None
        if wire_dtype is not None:
            self._wire = Wire(wire_dtype, ea_custom_getter.worker_device)
        with tf.compat.v1.device(ea_custom_getter.worker_device):
            self._local_step = tf.compat.v1.Variable(
                0, dtype=tf.int32, trainable=False, collections=[_LOCAL], name="local_step"
            )
        self._transport = ExchangeTransport(ea_custom_getter.worker_device)

    @property
    def communication_period(self):
        """Local steps between two exchanges (tau)."""
        return self._period

    @property
    def moving_rate(self):
        """The elastic rate alpha."""
        return self._moving_rate

    @property
    def local_step(self):
        """The worker-local step counter, incremented by every `apply_gradients` run."""
        return self._local_step

    def compute_gradients(
        self,
        loss,
        var_list=None,
        gate_gradients=_GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        grad_loss=None,
    ):
        """Adds the elastic penalty to `loss`, then computes gradients with the wrapped optimizer.

        The penalty is rho * sum(l2_loss(x - local_center(x))) over `var_list`, each
        variable with its own centre; with penalty="move" nothing is added here.

        Args:
            loss: the loss tensor (or a callable returning it).
            var_list: worker copies to differentiate; defaults to the trainable variables.
            gate_gradients, aggregation_method, colocate_gradients_with_ops, grad_loss: as
                for `tf.compat.v1.train.Optimizer.compute_gradients`.

        Returns:
            A list of (gradient, variable) pairs.

        Raises:
            ValueError: if a variable of `var_list` was not created through the getter.
        """
        if callable(loss):
            loss = loss()
        if var_list is None:
            var_list = tf.compat.v1.trainable_variables()
        var_list = flatten_partitions(var_list)
        loss = self._elastic_penalty.add_to(loss, [self._getter.find(v) for v in var_list])
        return self._opt.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Takes one local step and, every `communication_period` steps, the elastic exchange.

        Running the returned op applies the gradients with the wrapped optimizer (with
        penalty="move", also the elastic move) and adds one to `local_step`; when
        `local_step % communication_period == 0` it then sets each local centre to the
        global centre x~, computes d = alpha * (x - x~), applies x <- x - d and
        x~ <- x~ + d, and adds one to `global_step`. Only exchange steps reach the
        parameter servers (docs/DESIGN.md, "The exchange").

        Args:
            grads_and_vars: (gradient, variable) pairs, as `compute_gradients` returns.
            global_step: optional variable incremented once per exchange.
            name: optional name of the returned op.

        Returns:
            The training op.

        Raises:
            TypeError: if `global_step` is neither None nor a variable.
            ValueError: if `grads_and_vars` is empty or names a variable that was not
                created through the getter.
        """
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("grads_and_vars is empty: there is nothing to apply.")
        if global_step is not None and not isinstance(global_step, tf.Variable):
            raise TypeError(f"global_step must be a variable or None, got {global_step!r}.")
        centered = [self._getter.find(v) for _, v in grads_and_vars]
        local_update = self._apply_local_step(grads_and_vars, centered)
        with tf.name_scope(name or self.get_name()) as scope:
            exchanged = self._exchange_if_due(local_update, centered, global_step)
            return tf.group(exchanged, name=scope.rstrip("/").split("/")[-1])

    def _apply_local_step(self, grads_and_vars, centered):
        """Builds the wrapped optimizer's update (its variables local) and, with
        penalty="move", the elastic moves around it; returns the op."""
        # Empty unless penalty="move": then built before the update, applied after it.
        moves = self._elastic_penalty.moves(centered, self._getter.worker_device)
        with tf.compat.v1.variable_creator_scope(create_as_local_variable), moves.before():
            update = self._opt.apply_gradients(grads_and_vars)
        return moves.after(update, self._use_locking)

    def _exchange_if_due(self, local_update, centered, global_step):
        """Builds the count of the local step after `local_update` and the exchange every
        `communication_period` steps; returns a bool tensor, ready when both are done."""
        # Made outside `run_every`: it defines the functions each ps task runs.
        exchange = self._make_exchange(centered, global_step)
        with tf.compat.v1.device(self._getter.worker_device):
            with tf.control_dependencies([local_update]):
                step = tf.compat.v1.assign_add(self._local_step, 1, use_locking=self._use_locking)
            return run_every(self._period, step, exchange, name="exchange_if_due")

    def _make_exchange(self, centered, global_step):
        """Makes the exchange of `centered` (and of `global_step`, or None) that
        `_exchange_if_due` calls: an `ElasticExchange`, or an `OverlappedExchange`."""
        worker_device = self._getter.worker_device
        common = (centered, worker_device, self._moving_rate, global_step, self._use_locking)
        if not self._overlap:
            return self._exchange_class(*common, self._transport, self._wire)
        self._overlapped.append(self._overlapped_exchange_class(*common, self._wire))
        return self._overlapped[-1]

    def minimize(
        self,
        loss,
        global_step=None,
        var_list=None,
        gate_gradients=_GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        name=None,
        grad_loss=None,
    ):
        """Adds the penalty, computes gradients and returns the op of `apply_gradients`.

        Args:
            loss: the loss tensor.
            global_step: optional variable incremented once per exchange.
            var_list: worker copies to train; defaults to the trainable variables.
            name: optional name of the returned op.
            gate_gradients, aggregation_method, colocate_gradients_with_ops, grad_loss: as
                for `tf.compat.v1.train.Optimizer.minimize`.

        Returns:
            The training op.

        Raises:
            ValueError: if no variable gets a gradient, or one was not made by the getter.
        """
        grads_and_vars = self.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        if not [v for g, v in grads_and_vars if g is not None]:
            raise ValueError(
                f"No gradients for any variable of {[v.name for _, v in grads_and_vars]} "
                f"from loss {loss!r}."
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def get_init_op(self, task_index):
        """Returns the op that starts (or restarts) worker `task_index` from the centre.

        It assigns every worker copy and local centre the value of its global centre. With
        `synchronous=True` it first waits until every worker has arrived; a worker that
        arrives again later (restarted after the others started) does not wait.

        Args:
            task_index: index of this worker task, an int in `[0, num_worker)`.

        Raises:
            TypeError, ValueError: if `task_index` is not an int in `[0, num_worker)`.
            RuntimeError: if no variable was created through the getter yet.
        """
        _validation.check_index(task_index, "task_index", self._num_worker)
        init_op = build_init_op(
            self._getter,
            task_index,
            self._num_worker,
            self._synchronous,
            self.get_name(),
            self._wire,
        )
        self._transport.build()  # For `choose_exchange_transport`, while the graph can change.
        return init_op

    @property
    def overlap(self):
        """Whether exchanges overlap the local steps that follow them."""
        return self._overlap

    @property
    def wire_dtype(self):
        """The dtype of what an exchange sends to a parameter server: `tf.bfloat16` or
        `tf.float16` for a 16-bit wire, None when values cross at their own width."""
        return None if self._wire is None else self._wire.dtype

    def get_finish_op(self):
        """Returns the op that waits for the exchange in flight and lands its move.

        With `overlap=True`, run it once the last step is taken, before the session ends,
        so that the worker's last exchange is complete; the hook of
        `make_session_run_hook` does (in `end()`). Without overlap, a no-op.
        """
        if not self._overlapped:
            return tf.no_op(name="finish_exchanges")
        return tf.group(*(e.finish() for e in self._overlapped), name="finish_exchanges")

    def make_session_run_hook(self, is_chief, task_index):
        """Returns the hook that runs `get_init_op(task_index)` once the session exists.

        Args:
            is_chief: a bool, whether this worker is the chief; accepted for compatibility
                with contrib, every worker runs the same start-up.
            task_index: index of this worker task, an int in `[0, num_worker)`.

        Returns:
            An `ElasticAverageOptimizerHook` (for `MonitoredTrainingSession`, or an Estimator).

        Raises:
            TypeError, ValueError: if an argument is not as said above.
        """
        _validation.check_bool(is_chief, "is_chief")
        _validation.check_index(task_index, "task_index", self._num_worker)
        return ElasticAverageOptimizerHook(self, is_chief, task_index)

    def choose_exchange_transport(self, session):
        """Makes the exchanges call the parameter servers the cheapest way `session` allows.

        By `RemoteCall` (every session), or directly, which copies less, when `session` has
        `share_cluster_devices_in_session=True` and every ps task answers a probe
        (docs/DESIGN.md, "Transports"). The hook calls this after each session creation; a
        script with its own session, once the local variables are initialised.

        Args:
            session: a `tf.compat.v1.Session` of this worker's graph, not a monitored one
                (its hooks would run around the probe).

        Returns:
            "direct", "remote_call", or "none" when no centre lives on another task.

        Raises:
            TypeError: if `session` is not a `tf.compat.v1.Session`.
            tf.errors.UnavailableError: if a ps task was lost during the probe.
        """
        return self._transport.choose(session)

    def swapping_saver(self, var_list=None, name="swapping_saver", **saver_kwargs):
        """Returns a Saver that writes each global centre under its variable's own name.

        A model built without EASGD restores the trained centre with its default Saver
        (partitions as slices); this Saver restores such a checkpoint into the EASGD graph.

        Args:
            var_list: variables to save: worker copies and centres as the centre under the
                original name, anything else under its own name. By default, as a default
                Saver: every global variable and saveable object.
            name: name of the Saver.
            **saver_kwargs: passed on to `tf.compat.v1.train.Saver`.

        Returns:
            A `tf.compat.v1.train.Saver`.

        Raises:
            RuntimeError: if no variable was created through the getter yet.
            TypeError: if `var_list` is not a list, tuple or None.
        """
        return swapping_saver(self._getter, var_list, name, **saver_kwargs)

    def get_slot(self, var, name):
        """Returns slot `name` of `var` kept by the wrapped optimizer (e.g. Adam's "m")."""
        return self._opt.get_slot(var, name)

    def get_slot_names(self):
        """Returns the slot names of the wrapped optimizer."""
        return self._opt.get_slot_names()

    def variables(self):
        """Returns the wrapped optimizer's variables and `local_step`."""
        return [*self._opt.variables(), self._local_step]
