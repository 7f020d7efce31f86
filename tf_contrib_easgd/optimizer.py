"""ElasticAverageOptimizer: asynchronous Elastic Averaging SGD on tf.compat.v1."""

import tensorflow as tf

from tf_contrib_easgd import _validation
from tf_contrib_easgd.custom_getter import ElasticAverageCustomGetter, partitions
from tf_contrib_easgd.exchange import ElasticExchange, run_if
from tf_contrib_easgd.hook import ElasticAverageOptimizerHook
from tf_contrib_easgd.penalty import (
    GRADIENT,
    check_form,
    elastic_moves,
    learning_rate_for,
    warn_if_default_rho_is_rescaled,
)
from tf_contrib_easgd.transport import ExchangeTransport

_LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
_GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES


class ElasticAverageOptimizer(tf.compat.v1.train.Optimizer):
    """Wraps a `tf.compat.v1` optimizer to train with asynchronous Elastic Averaging SGD.

    Each worker i trains its own copy x_i of the variables with the wrapped optimizer. Every
    `communication_period` (tau) local steps it reads the centre x~ kept on the parameter
    servers, computes d = x_i - x~ and moves both towards each other:
    x_i <- x_i - alpha * d and x~ <- x~ + alpha * d, with alpha = `moving_rate`. The loss
    may carry the elastic penalty rho * sum(l2_loss(x_i - x~_last_read)). With Nesterov
    momentum as the wrapped optimizer this is EAMSGD (Zhang, Choromanska and LeCun, "Deep
    learning with Elastic Averaging SGD", NIPS 2015).

    `global_step`, when given to `apply_gradients` or `minimize`, is incremented once per
    exchange, not per local step: it counts communication rounds summed over all workers
    (as contrib did). With W workers and L local steps each it ends near W * L / tau.

    Usage in a between-graph replicated TF1 script (one copy per worker task):

    ```python
    worker_device = "/job:worker/task:%d" % task_index
    getter = ElasticAverageCustomGetter(worker_device=worker_device)
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
            worker_device=worker_device, cluster=cluster)), \\
         tf.compat.v1.variable_scope("", custom_getter=getter):
        logits = model(images)  # variables made with tf.compat.v1.get_variable
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), num_worker=len(workers),
            ea_custom_getter=getter, communication_period=10)
        train_op = opt.minimize(loss, global_step=global_step)
    hook = opt.make_session_run_hook(is_chief=task_index == 0, task_index=task_index)
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=task_index == 0, hooks=[hook]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    ```
    """

    BETA = 0.9
    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2
    # What builds the exchange (benchmarks swap in a copy-only one to measure its floor).
    _exchange_class = ElasticExchange

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
    ):
        """Creates the optimizer and its `local_step` variable on the worker.

        Between two exchanges each worker copy x is pulled towards its local centre x~' (the
        centre as last read), with strength rho; `penalty` chooses how:

        - "gradient" (contrib's form): rho * sum(l2_loss(x - x~')) is added to the loss in
          `compute_gradients`, so the pull rho * (x - x~') goes through the wrapped
          optimizer with the loss's gradient: plain SGD moves x by eta * rho * (x - x~'),
          momentum accumulates the pull (about 1 / (1 - momentum) times as strong), Adam and
          the other adaptive optimizers rescale it per coordinate.
        - "move" (the paper's form): on every local step `apply_gradients` applies, beside
          the wrapped optimizer's step, x <- x - eta * rho * (x_t - x~'), where x_t and x~'
          are read before the step (the point at which the gradient form evaluates its
          penalty) and eta is the wrapped optimizer's learning rate. With the default rho,
          eta * rho = moving_rate, whatever the optimizer (its learning rate is then not
          read). For plain SGD both forms give the same trajectory up to float rounding.
          The move applies to every variable of `grads_and_vars`, however its gradients
          were computed.

        Either way the exchange every `communication_period` steps is the same.

        With the default rho and penalty="gradient", a wrapped optimizer other than plain
        gradient descent gets an `ElasticPenaltyWarning`, once per process and message,
        saying how it scales the pull: contrib's trajectory is kept, not silently.

        Args:
            opt: the `tf.compat.v1.train.Optimizer` that takes the local steps.
            num_worker: number of worker tasks, at least 1.
            ea_custom_getter: the `ElasticAverageCustomGetter` the variables were made with.
            communication_period: local steps between two exchanges with the centre (tau).
            moving_rate: the elastic rate alpha in (0, 1]; None means
                `BETA / communication_period / num_worker`.
            rho: strength of the elastic pull between exchanges, >= 0; None means
                `moving_rate / learning_rate` of `opt`; 0.0 switches the pull off (the
                paper's asynchronous EASGD).
            use_locking: whether variable updates take locks.
            synchronous: whether `get_init_op` waits for all workers before training starts.
            name: name of the optimizer and prefix of the ops it makes.
            penalty: keyword only: "gradient" (contrib's form, the default) or "move" (the
                paper's form), see above.

        Raises:
            TypeError: if an argument has the wrong type (e.g. `opt` is a Keras optimizer,
                `penalty` is not a string).
            ValueError: if an argument is out of range or `penalty` is neither "gradient"
                nor "move"; if the learning rate of `opt` cannot be found or is a constant
                <= 0 while it is needed (the default `rho` with penalty="gradient", a
                positive `rho` with penalty="move"); or if eager execution is enabled.
        """
        _validation.check_graph_mode(type(self).__name__)
        if not isinstance(opt, tf.compat.v1.train.Optimizer):
            raise TypeError(
                "opt must be a tf.compat.v1.train.Optimizer (e.g. "
                "tf.compat.v1.train.GradientDescentOptimizer); Keras optimizers are not "
                f"supported. Got {opt!r} of type {type(opt).__name__}."
            )
        if not isinstance(ea_custom_getter, ElasticAverageCustomGetter):
            raise TypeError(
                "ea_custom_getter must be an ElasticAverageCustomGetter, got "
                f"{ea_custom_getter!r} of type {type(ea_custom_getter).__name__}."
            )
        num_worker = _validation.check_int(num_worker, "num_worker", 1)
        communication_period = _validation.check_int(
            communication_period, "communication_period", 1
        )
        moving_rate = _validation.check_number(moving_rate, "moving_rate", low=0.0, high=1.0)
        rho = _validation.check_number(rho, "rho", low=0.0, low_inclusive=True)
        _validation.check_bool(use_locking, "use_locking")
        _validation.check_bool(synchronous, "synchronous")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}.")
        penalty = check_form(penalty)
        if moving_rate is None:
            moving_rate = self.BETA / communication_period / num_worker
        learning_rate = learning_rate_for(opt, penalty, rho)
        warn_if_default_rho_is_rescaled(opt, penalty, rho, stacklevel=2)

        super().__init__(use_locking, name)
        self._opt = opt
        self._num_worker = num_worker
        self._getter = ea_custom_getter
        self._period = communication_period
        self._moving_rate = moving_rate
        self._rho_argument = rho  # None: the default, built with the graph.
        self._penalty = penalty
        self._learning_rate = learning_rate
        self._synchronous = synchronous
        with tf.compat.v1.device(ea_custom_getter.worker_device):
            self._local_step = tf.compat.v1.Variable(
                0,
                dtype=tf.int32,
                trainable=False,
                collections=[_LOCAL],
                name="local_step",
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

    # Contrib compatibility. Contrib's optimizer kept these private attributes, which code
    # written against it read; the others it had keep contrib's meaning under the same
    # names: `_opt` (the wrapped optimizer), `_num_worker`, `_period` (tau),
    # `_moving_rate` (alpha, its default computed), `_synchronous`, `_local_step` (the
    # int32 local variable `local_step`), `_use_locking` and `_name`.

    @property
    def _rho(self):
        """Contrib compatibility: rho as contrib held it, the default computed.

        The `rho` argument when one was given; for the default, `moving_rate /
        learning_rate` of the wrapped optimizer: a float for a constant learning rate, a
        new tensor on each read for a tensor or callable one. None for the default with
        penalty="move", which never reads the learning rate.
        """
        learning_rate = self._learning_rate
        if self._rho_argument is not None or learning_rate is None:
            return self._rho_argument
        if isinstance(learning_rate, int | float):
            return self._moving_rate / learning_rate
        return self._rho_tensor(tf.float32)

    @property
    def _local_map(self):
        """Contrib compatibility: the getter's read-only `CentreMap` from each worker copy
        (each partition of a partitioned variable) to its local centre; prefer
        `ea_custom_getter.find(v).local_center`."""
        return self._getter._local_map  # noqa: SLF001 (the same view, as contrib shared it)

    @property
    def _global_map(self):
        """Contrib compatibility: the getter's read-only `CentreMap` from each worker copy
        (each partition of a partitioned variable) to its global centre; prefer
        `ea_custom_getter.find(v).global_center`."""
        return self._getter._global_map  # noqa: SLF001 (the same view, as contrib shared it)

    @property
    def local_step(self):
        """The worker-local step counter, incremented by every `apply_gradients` run."""
        return self._local_step

    def compute_gradients(
        self,
        loss,
        var_list=None,
        gate_gradients=GATE_OP,
        aggregation_method=None,
        colocate_gradients_with_ops=False,
        grad_loss=None,
    ):
        """Adds the elastic penalty to `loss`, then computes gradients with the wrapped optimizer.

        The penalty is rho * sum(l2_loss(x - local_center(x))) over `var_list`; each
        variable is paired with its own centre, whatever the order of `var_list`. With
        penalty="move" nothing is added here: `apply_gradients` makes the elastic move.

        Args:
            loss: the loss tensor (or a callable returning it).
            var_list: worker copies to differentiate; defaults to the trainable variables.
            gate_gradients: GATE_NONE, GATE_OP or GATE_GRAPH.
            aggregation_method: see `tf.compat.v1.train.Optimizer.compute_gradients`.
            colocate_gradients_with_ops: place gradients with the ops they come from.
            grad_loss: optional gradient of `loss`.

        Returns:
            A list of (gradient, variable) pairs.

        Raises:
            ValueError: if a variable of `var_list` was not created through the getter.
        """
        if callable(loss):
            loss = loss()
        if var_list is None:
            var_list = tf.compat.v1.trainable_variables()
        var_list = _flatten_partitions(var_list)
        penalty_terms = [self._getter.find(v) for v in var_list]
        rho = self._rho_tensor(loss.dtype) if self._penalty == GRADIENT else None
        if rho is not None and penalty_terms:
            with tf.name_scope("elastic_penalty"):
                distances = [
                    tf.cast(tf.nn.l2_loss(entry.worker - entry.local_center), loss.dtype)
                    for entry in penalty_terms
                ]
                loss = loss + rho * tf.add_n(distances)
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
        penalty="move", also the elastic move x <- x - eta * rho * (x_t - x~'), x_t and x~'
        read before the update) and adds one to `local_step`; when
        `local_step % communication_period == 0` it then sets
        each local centre to the global centre x~, computes d = x - x~ and applies
        x <- x - alpha * d, x~ <- x~ + alpha * d, and adds one to `global_step`.

        A step that does not exchange runs on the worker alone: it sends nothing to the
        parameter servers. An exchange step makes one call to each ps task that holds
        centres, carrying this worker's values and returning the centres (see
        `tf_contrib_easgd/exchange.py`).

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

        # Empty unless penalty="move": then built before the update, applied after it.
        moves = elastic_moves(
            self._penalty,
            centered,
            self._rho_argument,
            self._moving_rate,
            self._learning_rate,
            self._getter.worker_device,
        )
        with tf.compat.v1.variable_creator_scope(_create_as_local_variable), moves.before():
            local_update = self._opt.apply_gradients(grads_and_vars)
        local_update = moves.after(local_update, self._use_locking)
        with tf.name_scope(name or self.get_name()) as scope:
            # Defined outside `run_if`: the functions each ps task runs (exchange.py).
            exchange = self._exchange_class(
                centered,
                self._getter.worker_device,
                self._moving_rate,
                global_step,
                self._use_locking,
                self._transport,
            )
            with tf.compat.v1.device(self._getter.worker_device):
                with tf.control_dependencies([local_update]):
                    step = tf.compat.v1.assign_add(
                        self._local_step, 1, use_locking=self._use_locking
                    )
                if self._period == 1:
                    with tf.control_dependencies([step]):
                        exchanged = exchange()
                else:
                    # Every op of the exchange is on the worker and gated by one Switch: a
                    # step that does not exchange runs no op on a parameter server.
                    exchanged = run_if(
                        tf.equal(tf.math.floormod(step, self._period), 0),
                        exchange,
                        name="exchange_if_due",
                    )
            return tf.group(exchanged, name=scope.rstrip("/").split("/")[-1])

    def minimize(
        self,
        loss,
        global_step=None,
        var_list=None,
        gate_gradients=GATE_OP,
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
            gate_gradients: GATE_NONE, GATE_OP or GATE_GRAPH.
            aggregation_method: see `tf.compat.v1.train.Optimizer.minimize`.
            colocate_gradients_with_ops: place gradients with the ops they come from.
            name: optional name of the returned op.
            grad_loss: optional gradient of `loss`.

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
            task_index: index of this worker task, in `[0, num_worker)`.

        Returns:
            An op.

        Raises:
            TypeError: if `task_index` is not an int.
            ValueError: if `task_index` is outside `[0, num_worker)`.
            RuntimeError: if no variable was created through the getter yet.
        """
        _validation.check_index(task_index, "task_index", self._num_worker)
        centered = self._getter.centered_variables()
        if not centered:
            raise RuntimeError(
                "No variable was created through the ElasticAverageCustomGetter yet: build "
                "the model under it before calling get_init_op."
            )
        with tf.name_scope(f"{self.get_name()}_init"):
            arrived = self._arrival_barrier(task_index, centered) if self._synchronous else []
            assigns = []
            with tf.control_dependencies(arrived), tf.compat.v1.device(self._getter.worker_device):
                for entry in centered:
                    center = tf.identity(entry.global_center.read_value())
                    assigns.append(tf.compat.v1.assign(entry.worker, center).op)
                    assigns.append(tf.compat.v1.assign(entry.local_center, center).op)
            init_op = tf.group(*assigns)
        self._transport.build()  # For `choose_exchange_transport`, while the graph can change.
        return init_op

    def _arrival_barrier(self, task_index, centered):
        """Builds a start-up barrier that a restarted worker passes without waiting.

        Worker i owns queue i on the parameter server holding the first centre. On arrival
        it puts a token into every other worker's queue and takes `num_worker - 1` tokens
        from its own, which blocks until all others have arrived. Once through, it puts
        `num_worker - 1` tokens back into its own queue, so that if it restarts later it
        finds them there and passes at once (contrib's barrier trapped such a worker).

        Returns:
            A list with the op that completes the barrier (empty for one worker).
        """
        if self._num_worker == 1:
            return []
        others = self._num_worker - 1
        anchor = min((entry.global_center for entry in centered), key=lambda v: v.name)
        with tf.compat.v1.device(anchor.device):
            queues = [
                tf.queue.FIFOQueue(
                    capacity=-1,
                    dtypes=[tf.bool],
                    shapes=[[]],
                    shared_name=f"{self.get_name()}_barrier_{j}",
                    name=f"barrier_queue_{j}",
                )
                for j in range(self._num_worker)
            ]
            arrive = [q.enqueue(True) for j, q in enumerate(queues) if j != task_index]
            with tf.control_dependencies(arrive):
                tokens = queues[task_index].dequeue_many(others)
            with tf.control_dependencies([tokens]):
                refill = queues[task_index].enqueue_many(tf.ones([others], tf.bool))
        return [refill]

    def make_session_run_hook(self, is_chief, task_index):
        """Returns the hook that runs `get_init_op(task_index)` once the session exists.

        Args:
            is_chief: whether this worker is the chief; accepted for compatibility with
                contrib, every worker runs the same start-up.
            task_index: index of this worker task, in `[0, num_worker)`.

        Returns:
            An `ElasticAverageOptimizerHook`, usable in `MonitoredTrainingSession` and as an
            Estimator training hook.

        Raises:
            TypeError: if `is_chief` is not a bool or `task_index` not an int.
            ValueError: if `task_index` is outside `[0, num_worker)`.
        """
        _validation.check_bool(is_chief, "is_chief")
        _validation.check_index(task_index, "task_index", self._num_worker)
        return ElasticAverageOptimizerHook(self, is_chief, task_index)

    def choose_exchange_transport(self, session):
        """Makes the exchanges call the parameter servers the cheapest way `session` allows.

        Exchanges go by default through a `RemoteCall` op, which works in every session. In a
        session whose `tf.compat.v1.ConfigProto` has `share_cluster_devices_in_session=True`
        they can instead call the ps tasks directly, through TensorFlow's Send/Recv, which
        copies less (`tf_contrib_easgd/transport.py`). The choice reads the `ConfigProto`
        `session` was created with: without the option it is `RemoteCall` at once, and
        nothing runs on the ps; with it, a probe asks every ps task whether it holds the
        exchange's variables, and the exchanges go directly if all say yes. Neither way
        makes TensorFlow log an error. The choice is recorded on the worker (a marker
        resource, no variable: collections and checkpoints stay contrib's) and logged at
        INFO when it changes. The hook of `make_session_run_hook` calls this after every
        session creation; a script that runs its own session calls it once after
        initialising the local variables.

        Args:
            session: a `tf.compat.v1.Session` of this worker's graph (not a monitored
                session, whose hooks would run around the probe), its local variables
                initialised.

        Returns:
            "direct", "remote_call", or "none" when no centre lives on another task.

        Raises:
            TypeError: if `session` is not a `tf.compat.v1.Session`.
            tf.errors.UnavailableError: if a ps task was lost during the probe.
        """
        return self._transport.choose(session)

    def swapping_saver(self, var_list=None, name="swapping_saver", **saver_kwargs):
        """Returns a Saver that writes each global centre under its variable's own name.

        A plain model built without EASGD then restores the trained centre with its default
        Saver. The same Saver restores such a checkpoint into the EASGD graph, centres
        included. Partitioned variables are saved as slices of the original name.

        Args:
            var_list: variables to save; worker copies and centres are both saved as the
                centre under the original name, anything else under its own name. Defaults
                to every global variable (centres, global step, batch-norm statistics, ...)
                and the saveable objects, as a default Saver would.
            name: name of the Saver.
            **saver_kwargs: passed on to `tf.compat.v1.train.Saver`.

        Returns:
            A `tf.compat.v1.train.Saver`.

        Raises:
            RuntimeError: if no variable was created through the getter yet.
            TypeError: if `var_list` is not a list, tuple or None.
        """
        centers = self._getter.global_centers_by_name()
        if not centers:
            raise RuntimeError(
                "swapping_saver() needs the EASGD variables: build the model under the "
                "ElasticAverageCustomGetter first."
            )
        if var_list is None:
            var_list = tf.compat.v1.global_variables() + tf.compat.v1.get_collection(
                tf.compat.v1.GraphKeys.SAVEABLE_OBJECTS
            )
        elif not isinstance(var_list, list | tuple):
            raise TypeError(f"var_list must be a list, a tuple or None, got {var_list!r}.")
        original_name = {}
        for name_, parts in centers.items():
            for part in parts:
                original_name[part.name] = name_
        for entry in self._getter.centered_variables():
            original_name[entry.worker.name] = original_name[entry.global_center.name]

        to_save = {}
        for item in _flatten_partitions(var_list):
            key = original_name.get(getattr(item, "name", None))
            if key is not None:
                parts = centers[key]
                to_save[key] = parts if len(parts) > 1 else parts[0]
            else:
                to_save.setdefault(_checkpoint_key(item), []).append(item)
        to_save = {
            key: value[0] if isinstance(value, list) and len(value) == 1 else value
            for key, value in to_save.items()
        }
        return tf.compat.v1.train.Saver(var_list=to_save, name=name, **saver_kwargs)

    def get_slot(self, var, name):
        """Returns slot `name` of `var` kept by the wrapped optimizer (e.g. Adam's "m")."""
        return self._opt.get_slot(var, name)

    def get_slot_names(self):
        """Returns the slot names of the wrapped optimizer."""
        return self._opt.get_slot_names()

    def variables(self):
        """Returns the wrapped optimizer's variables and `local_step`."""
        return [*self._opt.variables(), self._local_step]

    def _rho_tensor(self, dtype):
        """Returns rho as a `dtype` tensor, or None when the penalty is switched off."""
        if self._rho_argument is not None:
            return tf.constant(self._rho_argument, dtype) if self._rho_argument > 0 else None
        learning_rate = self._learning_rate
        if isinstance(learning_rate, int | float):
            # Divided in Python, rounded to `dtype` once, as contrib did: a float32 division
            # can be one ulp off (0.3 / 0.02 gives 15.000001, not 15.0).
            return tf.constant(self._moving_rate / learning_rate, dtype)
        if callable(learning_rate):
            learning_rate = learning_rate()
        return tf.cast(self._moving_rate, dtype) / tf.cast(learning_rate, dtype)


def _create_as_local_variable(next_creator, **kwargs):
    """Variable creator that puts the wrapped optimizer's variables in LOCAL_VARIABLES."""
    collections = kwargs.get("collections") or [_GLOBAL]
    kwargs["collections"] = [_LOCAL, *(c for c in collections if c not in (_GLOBAL, _LOCAL))]
    return next_creator(**kwargs)


def _flatten_partitions(variables):
    """Returns `variables` with each partitioned variable replaced by its partitions."""
    return [part for variable in variables for part in partitions(variable)]


def _checkpoint_key(variable):
    """Returns the name a default Saver would store `variable` (or its slice) under."""
    # The slice information of a partition is what TF's own Saver reads; it has no public
    # accessor.
    slice_info = getattr(variable, "_save_slice_info", None)
    if slice_info is not None:
        return slice_info.full_name
    if isinstance(variable, tf.Variable):
        return variable.op.name
    return variable.name
