"""EASGD's `global_step` counts exchanges: Estimator limits in local steps of each worker.

Each worker adds one to `global_step` per exchange with the centre, so the `steps` and
`max_steps` of `Estimator.train` and `TrainSpec` count exchanges summed over the workers.
Re-exported by `tf_contrib_easgd.estimator`; docs/ESTIMATOR.md shows their use.
"""

import tensorflow as tf

from tf_contrib_easgd import _validation


def exchanges_for(local_steps, num_workers, communication_period):
    """Returns the `global_step` reached when every worker took `local_steps` local steps.

    Each worker adds one to `global_step` per exchange, every `communication_period` local
    steps, so this is `num_workers * (local_steps // communication_period)`. Use it for
    `max_steps` of `Estimator.train` or `TrainSpec`; workers run asynchronously, so a fast
    worker may take more than `local_steps` steps and a slow one fewer before the sum is
    reached.

    Args:
        local_steps: local steps per worker, >= 0.
        num_workers: number of workers (chief included), >= 1.
        communication_period: local steps between two exchanges, >= 1.

    Returns:
        An int.

    Raises:
        TypeError: if an argument is not an int.
        ValueError: if an argument is out of range.
    """
    local_steps = _validation.check_int(local_steps, "local_steps", 0)
    num_workers = _validation.check_int(num_workers, "num_workers", 1)
    period = _validation.check_int(communication_period, "communication_period", 1)
    return num_workers * (local_steps // period)


class StopAtLocalStepHook(tf.compat.v1.train.SessionRunHook):
    """Requests a stop once this worker has run `num_steps` training steps.

    Estimator's `steps`/`max_steps` stop on `global_step`, which EASGD increments once per
    exchange summed over the workers. This hook counts local steps instead: every run of the
    training loop (in Estimator, each run is one run of the train op, i.e. one local step)
    of this worker, in this `train()` call, across session re-creations. Pass it in
    `Estimator.train(hooks=[...])` or `TrainSpec(hooks=[...])`, or in
    `MonitoredTrainingSession(hooks=[...])` when every `run` there is a training step.
    """

    def __init__(self, num_steps):
        """Creates the hook.

        Args:
            num_steps: local steps after which to stop, >= 1.

        Raises:
            TypeError: if `num_steps` is not an int.
            ValueError: if `num_steps < 1`.
        """
        self._num_steps = _validation.check_int(num_steps, "num_steps", 1)
        self._steps_run = 0

    @property
    def num_steps(self):
        """The number of local steps after which the hook requests a stop."""
        return self._num_steps

    @property
    def steps_run(self):
        """The local steps this worker ran so far under this hook."""
        return self._steps_run

    def after_run(self, run_context, run_values):
        """Counts the step and requests a stop when `num_steps` is reached."""
        del run_values  # Unused.
        self._steps_run += 1
        if self._steps_run >= self._num_steps:
            run_context.request_stop()
