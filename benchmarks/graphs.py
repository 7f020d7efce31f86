"""One worker's training graph for each benchmark configuration.

Configurations (names as in the tables):

- `local`: no parameter server; the worker trains its own variables (the ceiling).
- `async`: TF1 between-graph replication, variables on the ps, plain SGD (DOWNPOUR).
- `sync`: the same with `tf.compat.v1.train.SyncReplicasOptimizer` aggregating all workers.
- `easgd-P`: `ElasticAverageOptimizer` with communication period P and the default
  moving rate (0.9 / P / workers); `easgd-P-alphaA` sets the moving rate to A;
  `easgd-P-overlap` overlaps each exchange with the next P local steps (`overlap=True`);
  `-bf16` or `-fp16` last sends the exchanges over a 16-bit wire (`wire_dtype`).
- `naive-easgd-P`: the same algorithm with the first, per-step cross-device `tf.cond`
  exchange (`naive_easgd.py`), for comparison.
- `copy-easgd-P`: `easgd-P` with an exchange that moves the same bytes and does no
  arithmetic (`copy_only.py`): the floor of the exchange's cost. Its build first checks,
  on the cluster, that the exchange does just that (`copy_only.check_exchange`).

Every worker session shares the cluster's devices (`share_cluster_devices_in_session`), so
EASGD's exchanges call the ps directly (tf_contrib_easgd/exchange/transport.py), except in
`easgd-P-remotecall`: a session without that setting, whose exchanges go by `RemoteCall`
(what a TF1 script that does not set it gets).
"""

import dataclasses
import re

import tensorflow as tf

from benchmarks import copy_only, models
from benchmarks.naive_easgd import NaiveElasticAverageOptimizer
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

#: EASGD configurations: the period, then optionally the moving rate and rho, each a number
#: or `default` (the library's default: None), `-remotecall` or `-overlap`, and `-bf16` or
#: `-fp16` (a 16-bit wire). Without `-rho`, rho is 0.
_EASGD = re.compile(
    r"^(naive-|copy-)?easgd-(\d+)(?:-alpha(default|[0-9.]+))?(?:-rho(default|[0-9.]+))?"
    r"(-remotecall|-overlap)?(-bf16|-fp16)?$"
)
_WIRE_DTYPES = {"-bf16": "bfloat16", "-fp16": "float16"}
BASELINES = ("local", "async", "sync")
_OPTIMIZERS = {
    None: ElasticAverageOptimizer,
    "naive-": NaiveElasticAverageOptimizer,
    "copy-": copy_only.CopyOnlyElasticAverageOptimizer,
}


def _number_or_default(text, absent):
    """The number in `text`; None for "default" (the library's); `absent` without one."""
    if text is None:
        return absent
    return None if text == "default" else float(text)


def check_config(name):
    """Raises ValueError unless `name` is a known configuration."""
    if name not in BASELINES and not _EASGD.match(name):
        raise ValueError(
            f"Unknown configuration {name!r}; valid values are {list(BASELINES)}, "
            "'easgd-P', 'easgd-P-alphaA', 'easgd-P-alphaA-rhoR', 'easgd-P-remotecall', "
            "'easgd-P-overlap', 'easgd-P-bf16', 'easgd-P-overlap-fp16', "
            "'naive-easgd-P' and 'copy-easgd-P' for a period P >= 1, a moving rate A and a "
            "rho R (a number, or 'default' for the library's default)."
        )


@dataclasses.dataclass
class Built:
    """What a worker needs to run a configuration.

    Attributes:
        graph: the graph.
        train_op: one local step.
        chief_init: ops worker 0 runs one after the other to start (global state first).
        worker_init: ops the other workers run one after the other, after worker 0's.
        shared_params: name -> tensor of the shared model (centre, ps variables or own).
        sync_optimizer: the `SyncReplicasOptimizer` of `sync`, else None.
        easgd_optimizer: the `ElasticAverageOptimizer` of EASGD configurations, else None.
        share_devices: whether the worker's session shares the cluster's devices.
        loss: the model's loss on the step's batch (without an elastic penalty).
        exchange_op: EASGD's exchange alone, outside any step (`build`'s
            `standalone_exchange`), else None.
    """

    graph: tf.Graph
    train_op: tf.Operation
    chief_init: list
    worker_init: list
    shared_params: dict
    sync_optimizer: object = None
    easgd_optimizer: object = None
    share_devices: bool = True
    loss: tf.Tensor = None
    exchange_op: tf.Tensor = None


def build(
    config,
    spec,
    cluster_spec,
    task_index,
    num_workers,
    learning_rate,
    inputs_fn,
    container="",
    standalone_exchange=False,
):
    """Builds worker `task_index`'s graph of `config` for model `spec`.

    Args:
        config: a configuration name (see the module docstring).
        spec: a `models.ModelSpec`.
        cluster_spec: the `tf.train.ClusterSpec`, or None for `local` without a cluster.
        task_index: this worker's index.
        num_workers: number of workers taking part.
        learning_rate: SGD learning rate.
        inputs_fn: called on the worker device, returns the (images, labels) of a step.
        container: resource container of every variable and queue (fresh state per run).
        standalone_exchange: for an EASGD configuration, also build its exchange as an op
            of its own (`Built.exchange_op`), the same calls as the train op's.

    Returns:
        A `Built`.
    """
    check_config(config)
    if config.startswith("copy-") and cluster_spec is not None:
        # A floor is worth measuring only if the exchange does what it claims, in this world
        # and by the transport measured.
        share_devices = not config.endswith("-remotecall")
        copy_only.check_exchange(cluster_spec, task_index, share_devices)
    worker_device = f"/job:worker/task:{task_index}" if cluster_spec else ""
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.container(container):
        with tf.compat.v1.device(worker_device):
            images, labels = inputs_fn()
        sgd = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        if config == "local":
            with tf.compat.v1.device(worker_device):
                params = models.make_params(spec)
                loss = models.loss(spec, params, images, labels)
                train_op = sgd.minimize(loss)
            own_init = [
                tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
            ]
            return Built(graph, train_op, own_init, own_init, params, loss=loss)
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=worker_device, cluster=cluster_spec
        )
        if config in ("async", "sync"):
            with tf.compat.v1.device(setter):
                params = models.make_params(spec)
                global_step = tf.compat.v1.train.get_or_create_global_step()
                loss = models.loss(spec, params, images, labels)
                sync = None
                if config == "sync":
                    sync = tf.compat.v1.train.SyncReplicasOptimizer(
                        sgd, replicas_to_aggregate=num_workers, total_num_replicas=num_workers
                    )
                train_op = (sync or sgd).minimize(loss, global_step=global_step)
            local_init = tf.compat.v1.local_variables_initializer()
            chief_init = [tf.compat.v1.global_variables_initializer(), local_init]
            worker_init = [local_init]
            if sync is not None:
                chief_init += [sync.chief_init_op, sync.get_init_tokens_op()]
                worker_init += [sync.local_step_init_op]
            return Built(graph, train_op, chief_init, worker_init, params, sync, loss=loss)

        variant, period, moving_rate, rho, suffix, wire = _EASGD.match(config).groups()
        getter = ElasticAverageCustomGetter(worker_device)
        with (
            tf.compat.v1.device(setter),
            tf.compat.v1.variable_scope("", custom_getter=getter),
        ):
            params = models.make_params(spec)
            global_step = tf.compat.v1.train.get_or_create_global_step()
            optimizer_class = _OPTIMIZERS[variant]
            opt = optimizer_class(
                sgd,
                num_workers,
                getter,
                communication_period=int(period),
                moving_rate=_number_or_default(moving_rate, None),
                rho=_number_or_default(rho, 0.0),
                **({"overlap": True} if suffix == "-overlap" else {}),
                **({"wire_dtype": _WIRE_DTYPES[wire]} if wire else {}),
            )
            loss = models.loss(spec, params, images, labels)
            train_op = opt.minimize(loss, global_step=global_step)
            exchange_op = None
            if standalone_exchange:  # Before the init op: a 16-bit wire refuses it after.
                centered = [getter.find(v) for v in params.values()]
                with tf.compat.v1.device(worker_device):
                    exchange_op = opt._make_exchange(centered, global_step)()
            worker_init = [tf.compat.v1.local_variables_initializer(), opt.get_init_op(task_index)]
            chief_init = [tf.compat.v1.global_variables_initializer(), *worker_init]
        centres = {name: getter.find(v).global_center for name, v in params.items()}
        return Built(
            graph,
            train_op,
            chief_init,
            worker_init,
            centres,
            None,
            opt,
            suffix != "-remotecall",
            loss,
            exchange_op,  # fmt: skip
        )
