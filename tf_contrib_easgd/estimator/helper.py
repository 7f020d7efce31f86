"""`ElasticAverageEstimatorHelper`: an Estimator's model_fn under EASGD
(`tf_contrib_easgd.estimator` exports it with the limits of a job in local steps)."""

import tensorflow as tf

from tf_contrib_easgd.cluster.tf_config import TRAINER_TYPES, easgd_worker_index
from tf_contrib_easgd.custom_getter import ElasticAverageCustomGetter
from tf_contrib_easgd.optimizer import ElasticAverageOptimizer

__all__ = ["ElasticAverageEstimatorHelper"]


def _import_estimator():
    """Returns the `tf.estimator` module, or raises ImportError saying what to install."""
    try:
        estimator = tf.estimator
        estimator.EstimatorSpec  # noqa: B018  Loads tensorflow_estimator (lazily imported).
    except (AttributeError, ImportError) as error:
        raise ImportError(
            f"tf_contrib_easgd.estimator needs tf.estimator, which TensorFlow {tf.__version__} "
            "does not have (TensorFlow 2.16 removed it). Use it with TensorFlow 2.15 and the "
            "Estimator package: pip install 'tensorflow==2.15.1' 'tensorflow-estimator==2.15.0' "
            "(or pip install -c constraints-tf215.txt '.[estimator]' in this project's "
            "checkout). On newer TensorFlow, train with "
            "ElasticAverageOptimizer and its make_session_run_hook() in "
            "tf.compat.v1.train.MonitoredTrainingSession instead."
        ) from error
    return estimator


_estimator = _import_estimator()
_ModeKeys = _estimator.ModeKeys


class ElasticAverageEstimatorHelper:
    """Makes a `tf.estimator` model_fn train with EASGD and evaluate the centre.

    Create one per model_fn call, from its `mode` and `config` (the Estimator's `RunConfig`,
    which knows the cluster from TF_CONFIG). In TRAIN mode it builds the
    `ElasticAverageCustomGetter` of this task, wraps the optimizer in an
    `ElasticAverageOptimizer` for all workers, and adds to the `EstimatorSpec` the hook that
    starts the worker from the centre and a `Scaffold` whose saver is the optimizer's
    `swapping_saver`. In EVAL and PREDICT mode it adds nothing: the model is a plain one
    whose variables restore the trained centre from the checkpoint.

    Workers are the `chief` (or `master`) task, worker 0, and the `worker` tasks, worker
    i + 1 (worker i without a chief), as in the rest of the library. Training on more than
    one worker needs `ps` tasks, which hold the centre.
    """

    def __init__(
        self,
        mode,
        config,
        communication_period=10,
        moving_rate=None,
        rho=None,
        synchronous=False,
        use_locking=True,
    ):
        """Reads the task from `config`; in TRAIN mode, builds the custom getter.

        Args:
            mode: the model_fn's `mode`, a `tf.estimator.ModeKeys` value.
            config: the model_fn's `config`, the Estimator's `tf.estimator.RunConfig`.
            communication_period: local steps between two exchanges (tau).
            moving_rate: the elastic rate alpha; see `ElasticAverageOptimizer`.
            rho: weight of the elastic penalty; see `ElasticAverageOptimizer`.
            synchronous: whether workers wait for each other before training starts.
            use_locking: whether variable updates take locks.

        Raises:
            TypeError: if `config` is not a `RunConfig`.
            ValueError: if `mode` is not a `ModeKeys` value, or in TRAIN mode the task is no
                worker or a cluster of several workers has no `ps` task.
        """
        valid_modes = (_ModeKeys.TRAIN, _ModeKeys.EVAL, _ModeKeys.PREDICT)
        if mode not in valid_modes:
            raise ValueError(f"mode must be one of {list(valid_modes)}, got {mode!r}.")
        if not isinstance(config, _estimator.RunConfig):
            raise TypeError(
                "config must be the model_fn's tf.estimator.RunConfig (declare `config` as a "
                f"model_fn argument), got {config!r} of type {type(config).__name__}."
            )
        self._mode = mode
        self._config = config
        self._optimizer_kwargs = {
            "communication_period": communication_period,
            "moving_rate": moving_rate,
            "rho": rho,
            "synchronous": synchronous,
            "use_locking": use_locking,
        }
        self._optimizer = None
        self._getter = None
        if self.is_training:
            self._check_cluster()
            self._getter = ElasticAverageCustomGetter(worker_device=self.worker_device)

    @property
    def mode(self):
        """The model_fn's mode."""
        return self._mode

    @property
    def is_training(self):
        """Whether the model_fn builds a training graph."""
        return self._mode == _ModeKeys.TRAIN

    @property
    def is_chief(self):
        """Whether this task is the chief (from the RunConfig)."""
        return bool(self._config.is_chief)

    @property
    def num_workers(self):
        """Number of training tasks: the chief (or master) and the workers."""
        return max(1, self._config.num_worker_replicas)

    @property
    def task_index(self):
        """This task's EASGD worker index: 0 for the chief, i + 1 for worker i.

        Raises:
            ValueError: if this task does not train (a `ps` or `evaluator` task).
        """
        task_type, task_id = self._config.task_type, self._config.task_id
        if task_type in TRAINER_TYPES:  # "worker" is also the task type of local training.
            return easgd_worker_index(task_type, task_id, self._config.cluster_spec.jobs)
        raise ValueError(
            f"Task {task_type!r} {task_id} does not train: EASGD worker indices exist for "
            f"the task types {list(TRAINER_TYPES)} only."
        )

    @property
    def worker_device(self):
        """The device of this worker's copies: `/job:<type>/task:<id>`, or "" locally."""
        if not self._config.cluster_spec.jobs:
            return ""
        return f"/job:{self._config.task_type}/task:{self._config.task_id}"

    @property
    def custom_getter(self):
        """The `ElasticAverageCustomGetter` in TRAIN mode, None otherwise.

        For models that open their own scopes:
        `tf.compat.v1.variable_scope("model", custom_getter=easgd.custom_getter)`.
        """
        return self._getter

    def variable_scope(self, name_or_scope="", **kwargs):
        """Returns the variable scope to build the model in.

        In TRAIN mode it carries the EASGD custom getter; otherwise it is a plain scope, so
        evaluation and prediction build the plain model. Create the model's variables with
        `tf.compat.v1.get_variable` (the `tf.compat.v1.layers` do).

        Args:
            name_or_scope: the scope; "" (the default) keeps variable names unchanged.
            **kwargs: passed on to `tf.compat.v1.variable_scope`.

        Returns:
            A context manager.
        """
        return tf.compat.v1.variable_scope(name_or_scope, custom_getter=self._getter, **kwargs)

    def optimizer(self, opt, name="ElasticAverageOptimizer"):
        """Wraps `opt` in the `ElasticAverageOptimizer` of this task (TRAIN mode only).

        Call it once per model_fn call, after building the model, and train with what it
        returns: `opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())`.

        Args:
            opt: a `tf.compat.v1.train.Optimizer`.
            name: name of the wrapping optimizer.

        Returns:
            An `ElasticAverageOptimizer`.

        Raises:
            RuntimeError: outside TRAIN mode, or if called twice.
            TypeError, ValueError: as `ElasticAverageOptimizer` raises them.
        """
        if not self.is_training:
            raise RuntimeError(
                f"optimizer() is for TRAIN mode; the model_fn runs in {self._mode!r} mode. "
                "Build the optimizer under `if mode == tf.estimator.ModeKeys.TRAIN:`."
            )
        if self._optimizer is not None:
            raise RuntimeError("optimizer() was called already in this model_fn call.")
        self._optimizer = ElasticAverageOptimizer(
            opt,
            num_worker=self.num_workers,
            ea_custom_getter=self._getter,
            name=name,
            **self._optimizer_kwargs,
        )
        return self._optimizer

    def training_hooks(self):
        """Returns the training hooks EASGD needs: the one that starts a worker from the centre.

        Raises:
            RuntimeError: if `optimizer()` was not called (or outside TRAIN mode).
        """
        opt = self._checked_optimizer("training_hooks()")
        return [opt.make_session_run_hook(is_chief=self.is_chief, task_index=self.task_index)]

    def scaffold(self, scaffold=None):
        """Returns a `Scaffold` whose saver writes the centres under the original names.

        The saver is `swapping_saver()` with the settings of Estimator's default Saver
        (sharded, `keep_checkpoint_max` and `keep_checkpoint_every_n_hours` of the
        RunConfig, relative paths).

        Args:
            scaffold: an optional `tf.compat.v1.train.Scaffold` of the user, without a
                saver; its other fields are kept.

        Raises:
            RuntimeError: if `optimizer()` was not called (or outside TRAIN mode).
            ValueError: if `scaffold` has a saver already.
        """
        opt = self._checked_optimizer("scaffold()")
        if scaffold is not None and scaffold.saver is not None:
            raise ValueError(
                "The scaffold passed has a saver; EASGD training checkpoints must be written "
                "by the optimizer's swapping_saver(). Pass a Scaffold without saver."
            )
        saver = opt.swapping_saver(
            sharded=True,
            max_to_keep=self._config.keep_checkpoint_max,
            keep_checkpoint_every_n_hours=self._config.keep_checkpoint_every_n_hours,
            save_relative_paths=True,
        )
        return tf.compat.v1.train.Scaffold(saver=saver, copy_from_scaffold=scaffold)

    def estimator_spec(self, **kwargs):
        """Returns the `tf.estimator.EstimatorSpec`, with EASGD's hooks and saver in TRAIN mode.

        Args:
            **kwargs: the `EstimatorSpec` arguments except `mode` (`loss`, `train_op`,
                `predictions`, `eval_metric_ops`, ...). In TRAIN mode, `training_hooks` are
                extended and `scaffold` (if any, without saver) gets the swapping saver.

        Returns:
            A `tf.estimator.EstimatorSpec`.

        Raises:
            RuntimeError: in TRAIN mode, if `optimizer()` was not called.
            TypeError: if `mode` is passed (the helper knows it).
            ValueError: as `EstimatorSpec` raises it, or if `scaffold` has a saver.
        """
        if "mode" in kwargs:
            raise TypeError("estimator_spec() takes the mode from the helper; do not pass it.")
        if self.is_training:
            kwargs["training_hooks"] = [
                *(kwargs.get("training_hooks") or ()),
                *self.training_hooks(),
            ]
            kwargs["scaffold"] = self.scaffold(kwargs.get("scaffold"))
        return _estimator.EstimatorSpec(mode=self._mode, **kwargs)

    def _checked_optimizer(self, what):
        if self._optimizer is None:
            raise RuntimeError(
                f"{what} needs the optimizer: in TRAIN mode call easgd.optimizer(opt) and "
                "train with what it returns first."
            )
        return self._optimizer

    def _check_cluster(self):
        """Checks that this task trains and that several workers have a ps for the centre."""
        self.task_index  # noqa: B018  Raises for ps and evaluator tasks.
        if self.num_workers > 1 and self._config.num_ps_replicas < 1:
            raise ValueError(
                f"The cluster has {self.num_workers} workers but no 'ps' task: EASGD keeps "
                "the centre on parameter servers. Add a 'ps' job to TF_CONFIG."
            )
