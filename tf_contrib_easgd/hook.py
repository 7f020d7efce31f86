"""The session-run hook that starts every worker from the centre."""

import tensorflow as tf


class ElasticAverageOptimizerHook(tf.compat.v1.train.SessionRunHook):
    """Runs `ElasticAverageOptimizer.get_init_op(task_index)` after the session is created.

    The init op is built in `begin()`, while the graph can still change, and run in
    `after_create_session()`: on the first start, after a restart of the worker, and after
    `MonitoredTrainingSession` recovers from a lost parameter server. Make it with
    `ElasticAverageOptimizer.make_session_run_hook`; it works in
    `MonitoredTrainingSession` and as an Estimator training hook.
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

    @property
    def is_chief(self):
        """Whether the hook was made for the chief worker."""
        return self._is_chief

    def begin(self):
        """Builds the init op."""
        self._init_op = self._optimizer.get_init_op(self._task_index)

    def after_create_session(self, session, coord):
        """Copies the centre into this worker's variables (after the barrier, if any)."""
        del coord  # Unused.
        session.run(self._init_op)
