"""The graph and session of one worker of the scale harness (`scale_task.py` runs them).

The model's variables under EASGD, their centres spread evenly over the ps tasks by
partitioned variables and a `replica_device_setter`; the library's optimizer, its
exchange on every run of its train op; with easgd-train's pieces (work ledger, savers,
hook) for the end-of-job measurements (`scale_pieces.py`).
"""

import types

import tensorflow as tf

from benchmarks import specs
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.custom_getter import partitions
from tf_contrib_easgd.trainer.ledger import WorkLedger

#: A blocked session.run fails after this long instead of hanging the harness.
OPERATION_TIMEOUT_MS = 120_000


def worker_graph(model, ps_tasks, wire, num_workers, index, container, trainer=False):
    """Worker `index`'s graph: `model`'s variables under EASGD, its centres on `ps_tasks`.

    Every weight matrix is a partitioned variable, one shard per ps task, so that a
    `replica_device_setter` spreads the centre evenly. The loss reads one row of each
    shard: its gradient, and so the wrapped SGD step, touches a row (the compute it stands
    for is the harness's wait); the exchange moves every value. The optimizer exchanges
    on each run of its train op (`communication_period=1`); the host runs it every
    `period` local steps. With `trainer`, easgd-train's pieces too: its work ledger on
    ps 0, its sharded checkpoint saver, the export saver and the EASGD hook.

    Returns:
        A namespace: graph, train_op, chief_init, worker_init, optimizer, global_step and,
        with `trainer`, ledger, saver, export_saver, hook.
    """
    device = f"/job:worker/task:{index}"
    g = types.SimpleNamespace(graph=tf.Graph())
    with g.graph.as_default(), tf.compat.v1.container(container):
        getter = ElasticAverageCustomGetter(device)
        setter = tf.compat.v1.train.replica_device_setter(ps_tasks=ps_tasks, worker_device=device)
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            loss = 0.0
            for name, shape in specs.MODELS[model].shapes().items():
                sharded = len(shape) == 2
                variable = tf.compat.v1.get_variable(
                    name,
                    shape,
                    initializer=tf.compat.v1.zeros_initializer(),
                    partitioner=tf.compat.v1.fixed_size_partitioner(ps_tasks) if sharded else None,
                )
                for part in partitions(variable):
                    loss += tf.reduce_sum(tf.gather(part, [0]))
            g.global_step = tf.compat.v1.train.get_or_create_global_step()
            g.optimizer = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.01),
                num_workers,
                getter,
                communication_period=1,
                rho=0.0,
                wire_dtype=wire,
            )
            g.train_op = g.optimizer.minimize(loss, global_step=g.global_step)
            if trainer:  # As easgd-train's graph.build_worker_graph makes them.
                g.hook = g.optimizer.make_session_run_hook(index == 0, index)
                g.ledger = WorkLedger(num_workers, index)
                g.saver = tf.compat.v1.train.Saver(
                    sharded=True, max_to_keep=3, save_relative_paths=True, name="checkpoint_saver"
                )
                g.export_saver = g.optimizer.swapping_saver(name="export_saver")
            g.worker_init = [
                tf.compat.v1.local_variables_initializer(),
                g.optimizer.get_init_op(index),
            ]
            g.chief_init = [tf.compat.v1.global_variables_initializer(), *g.worker_init]
    return g


def session_config(index, ps_tasks):
    """The session of worker `index`: ps tasks 0..ps_tasks-1 and itself (the others may be
    down), exchanges called directly."""
    return tf.compat.v1.ConfigProto(
        device_filters=[
            *(f"/job:ps/task:{k}" for k in range(ps_tasks)),
            f"/job:worker/task:{index}",
        ],
        operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
        share_cluster_devices_in_session=True,
    )
