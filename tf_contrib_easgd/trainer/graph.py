"""The graph of one easgd-train worker: the model under EASGD, the centre's evaluation, savers.

Between-graph replication: each worker builds its own graph, with the model's variables on
the worker and their centres on the parameter servers. `build_worker_graph` returns the
tensors and ops the worker's session loop runs as a `WorkerGraph`. See docs/DESIGN.md,
"The trainer's task lifecycle".
"""

import dataclasses

import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer, WorkLedger
from tf_contrib_easgd.trainer import models
from tf_contrib_easgd.trainer.config import OPTIMIZERS


def make_optimizer(name, learning_rate):
    """Returns the `tf.compat.v1.train` optimizer `name` of `learning_rate` (`momentum` and
    `nesterov` with `models.MOMENTUM`).

    Raises:
        ValueError: if `name` is not one of `OPTIMIZERS`.
    """
    train = tf.compat.v1.train
    if name == "sgd":
        return train.GradientDescentOptimizer(learning_rate)
    if name in ("momentum", "nesterov"):
        return train.MomentumOptimizer(
            learning_rate, models.MOMENTUM, use_nesterov=name == "nesterov"
        )
    if name == "adam":
        return train.AdamOptimizer(learning_rate)
    if name == "adagrad":
        return train.AdagradOptimizer(learning_rate)
    if name == "rmsprop":
        return train.RMSPropOptimizer(learning_rate)
    raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {name!r}.")


@dataclasses.dataclass
class CentreEvaluation:
    """The model once more, on the global centres: what the chief's learning curve runs.

    Attributes:
        images: placeholder of a batch of test images.
        labels: placeholder of their labels.
        sums: `(correct, loss)` over the batch (see `models.metric_sums`).
    """

    images: tf.Tensor
    labels: tf.Tensor
    sums: tuple


@dataclasses.dataclass
class WorkerGraph:
    """The graph of one worker and the tensors and ops the session loop uses."""

    graph: tf.Graph
    images: tf.Tensor
    labels: tf.Tensor
    loss: tf.Tensor
    train_op: tf.Operation
    global_step: tf.Variable
    distance: tf.Tensor
    centre_eval: CentreEvaluation
    optimizer: ElasticAverageOptimizer
    centres: list
    hook: tf.compat.v1.train.SessionRunHook
    saver: tf.compat.v1.train.Saver
    export_saver: tf.compat.v1.train.Saver
    ledger: WorkLedger

    def centre_by_name(self):
        """`{variable name: global centre}`, a fetch whose value `export.centre_digest` takes."""
        return {v.op.name: v for v in self.centres}


def build_worker_graph(task, config, image_shape, num_classes):
    """Returns the `WorkerGraph` of worker `task.task_index` (a `cluster.TaskConfig`) in the
    job of `config` (a `config.TrainConfig`), for images of `image_shape` `(height, width,
    channels)` in `num_classes` classes."""
    # The order in which the ops are made is part of the job: with a graph-level seed, each
    # initialiser's seed follows from the ops made before it.
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(config.seed)
        getter = ElasticAverageCustomGetter(worker_device=task.device)
        device_setter = tf.compat.v1.train.replica_device_setter(
            worker_device=task.device, cluster=task.cluster_spec()
        )
        with tf.compat.v1.device(device_setter):
            images, labels, loss = _build_loss(getter, config.model, image_shape, num_classes)
            global_step = tf.compat.v1.train.get_or_create_global_step()
            optimizer = _build_optimizer(getter, task, config)
            train_op = optimizer.minimize(loss, global_step=global_step)
            hook = optimizer.make_session_run_hook(task.is_chief, task.task_index)
            distance = getter.elastic_distance()
            centre_eval = _build_centre_evaluation(getter, config.model, image_shape, num_classes)
            ledger = WorkLedger(
                task.cluster_spec(),
                task.is_chief,
                task.task_index,
                config.steps,
                config.communication_period,
            )
            saver = tf.compat.v1.train.Saver(
                sharded=True, max_to_keep=3, save_relative_paths=True, name="checkpoint_saver"
            )
            export_saver = optimizer.swapping_saver(name="export_saver")
    return WorkerGraph(
        graph=graph,
        images=images,
        labels=labels,
        loss=loss,
        train_op=train_op,
        global_step=global_step,
        distance=distance,
        centre_eval=centre_eval,
        optimizer=optimizer,
        centres=[entry.global_center for entry in getter.centered_variables()],
        hook=hook,
        saver=saver,
        export_saver=export_saver,
        ledger=ledger,
    )


def _build_loss(getter, model, image_shape, num_classes):
    """The model under the EASGD getter and its mean loss: `(images, labels, loss)`."""
    images = tf.compat.v1.placeholder(tf.float32, [None, *image_shape], name="images")
    labels = tf.compat.v1.placeholder(tf.int64, [None], name="labels")
    with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), custom_getter=getter):
        logits = models.build_model(model, images, num_classes)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits),
        name="loss",
    )
    return images, labels, loss


def _build_optimizer(getter, task, config):
    """The `ElasticAverageOptimizer` around the `--optimizer` of the job."""
    return ElasticAverageOptimizer(
        make_optimizer(config.optimizer, config.learning_rate),
        num_worker=task.num_workers,
        ea_custom_getter=getter,
        communication_period=config.communication_period,
        moving_rate=config.moving_rate,
        rho=config.rho,
        synchronous=config.synchronous,
        overlap=config.overlap,
        wire_dtype=config.wire_dtype,
    )


def _build_centre_evaluation(getter, model, image_shape, num_classes):
    """The same model once more, reading the global centres instead of the worker's copy."""
    centres = getter.global_centers_by_name()

    def centre_getter(getter, name, *args, **kwargs):
        del getter, args, kwargs  # The variables exist: the model's centres.
        return centres[name][0]

    images = tf.compat.v1.placeholder(tf.float32, [None, *image_shape])
    labels = tf.compat.v1.placeholder(tf.int64, [None])
    with (
        tf.name_scope("centre_eval"),
        tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), custom_getter=centre_getter),
    ):
        logits = models.build_model(model, images, num_classes)
        sums = models.metric_sums(logits, labels)
    return CentreEvaluation(images=images, labels=labels, sums=sums)
