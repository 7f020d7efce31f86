"""The session-run hook that starts every worker from the centre and picks its transport.

docs/DESIGN.md ("A worker's start").
"""

import tensorflow as tf


class ElasticAverageOptimizerHook(tf.compat.v1.train.SessionRunHook):
    """Runs `get_init_op(task_index)` and `choose_exchange_transport` after session creation.

    The init op is built in `begin()`, while the graph can still change, and run in
    `after_create_session()`: on the first start, after a restart of the worker, and after
    `MonitoredTrainingSession` recovers from a lost parameter server. Make it with
    `ElasticAverageOptimizer.make_session_run_hook`; it works in
    `MonitoredTrainingSession` and as an Estimator training hook.

    Choosing the transport provokes no error: a session that does not share the cluster's
    devices gets `RemoteCall` without running anything on the ps, and the choice is
    logged at INFO only when it changes (docs/DESIGN.md, "Transports").

    For code written against contrib's `_ElasticAverageOptimizerHook`, `_ea_optimizer`,
    `_is_chief`, `_task_index` and (after `begin()`) `_variable_init_op` read as there.
    """

    def __init__(self, optimizer, is_chief, task_index):
        """Creates the hook.

        Args:
            optimizer: the `ElasticAverageOptimizer` whose init op to run.
            is_chief: whether this worker is the chief (kept for contrib compatibility).
            task_index: index of this worker task.
        """
        self._optimizer = optimizer
        self._is_chief = is_chief
        self._task_index = task_index
        self._init_op = None
        self._finish_op = None
        self._exchange_transport = None

    @property
    def is_chief(self):
        """Whether the hook was made for the chief worker."""
        return self._is_chief

    @property
    def _ea_optimizer(self):
        """Contrib compatibility: the `ElasticAverageOptimizer` the hook starts."""
        return self._optimizer

    @property
    def _variable_init_op(self):
        """Contrib compatibility: the init op `begin()` built (None before)."""
        return self._init_op

    @property
    def exchange_transport(self):
        """How the exchanges of the last session created go: "direct", "remote_call" or
        "none" (see `ElasticAverageOptimizer.choose_exchange_transport`); None before."""
        return self._exchange_transport

    def begin(self):
        """Builds the init op (and with it the probe of the exchange transport), and with
        `overlap=True` the op that completes the exchange in flight."""
        self._init_op = self._optimizer.get_init_op(self._task_index)
        if self._optimizer.overlap:
            self._finish_op = self._optimizer.get_finish_op()

    def after_create_session(self, session, coord):
        """Copies the centre into this worker's variables (after the barrier, if any), then
        chooses how the exchanges reach the parameter servers (`choose_exchange_transport`:
        from the session's `ConfigProto`, and with a probe of the ps only when it shares
        the cluster's devices).
        """
        del coord  # Unused.
        session.run(self._init_op)
        self._exchange_transport = self._optimizer.choose_exchange_transport(session)

    def end(self, session):
        """With `overlap=True`, waits for the exchange in flight and lands its move."""
        if self._finish_op is not None:
            session.run(self._finish_op)
