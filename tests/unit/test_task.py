"""Tests of easgd-train's tasks (trainer/task.py, worker.py, graph.py, export.py): the worker
graph, and whole jobs run in threads.

The jobs here run every task of a small cluster in one process (a thread per task, each
with its own gRPC server on a loopback port and its own graph, as between-graph
replication has it), which costs seconds instead of the TensorFlow import of one process
per task. tests/e2e/test_train_e2e.py and tests/e2e/test_end_to_end.py run tasks as processes.
"""

import numpy as np
import pytest
import tensorflow as tf
from trainer_configs import train_config as _config

from tf_contrib_easgd.trainer import cluster, export, graph, models
from tf_contrib_easgd.trainer.config import MODELS, OPTIMIZERS


def _job_and_task(device):
    spec = tf.DeviceSpec.from_string(device)
    return f"/job:{spec.job}/task:{spec.task}"


def test_worker_graph_placement():
    # Worker 1 of a cluster with two ps tasks; no server is needed to build the graph.
    one = cluster.TaskConfig(("p0:1", "p1:1"), ("w0:1", "w1:1"), "worker", 1)
    g = graph.build_worker_graph(one, _config("/unused"), (8, 8, 1), 10)
    with g.graph.as_default():
        centres = [v for v in tf.compat.v1.global_variables() if "center" in v.op.name]
        assert {v.device for v in centres} == {"/job:ps/task:0", "/job:ps/task:1"}
        workers = tf.compat.v1.trainable_variables()
        assert {v.device for v in workers} == {"/job:worker/task:1"}
    assert g.loss.device == "/job:worker/task:1"
    assert g.distance.device == "/job:worker/task:1"
    # The end of the job (WorkLedger): its variables on ps 0, a `shutdown` queue on each ps.
    ledger = g.ledger.variables
    variables = [ledger.local_steps, ledger.job_done, ledger.acknowledged]
    assert {_job_and_task(v.device) for v in variables} == {"/job:ps/task:0"}
    queues = {
        op.get_attr("shared_name").decode(): _job_and_task(op.device)
        for op in g.graph.get_operations()
        if op.type == "FIFOQueueV2"
    }
    assert queues == {
        "tf_contrib_easgd_shutdown_0": "/job:ps/task:0",
        "tf_contrib_easgd_shutdown_1": "/job:ps/task:1",
    }


def test_the_chief_reports_which_ps_holds_which_centre(world):
    del world  # Ref variables in TF1 mode, resource variables in TF 2 graph mode.
    one = cluster.TaskConfig(("p0:1", "p1:1"), ("w0:1", "w1:1"), "worker", 0)
    g = graph.build_worker_graph(one, _config("/unused"), (8, 8, 1), 10)
    # replica_device_setter puts the ps variables on the ps tasks in turn, in the order
    # they are made: the mlp's hidden kernel on ps 0, its bias on ps 1, the logits'
    # kernel on ps 0 and bias on ps 1 (global_step and the ledger follow, not centres).
    assert export.centre_placement(g.centres) == {
        "ps 0": [
            "global_center_variable/mlp/hidden_0/kernel",
            "global_center_variable/mlp/logits/kernel",
        ],
        "ps 1": [
            "global_center_variable/mlp/hidden_0/bias",
            "global_center_variable/mlp/logits/bias",
        ],
    }
    alone = cluster.TaskConfig(("p0:1",), ("w0:1", "w1:1"), "worker", 0)
    g = graph.build_worker_graph(alone, _config("/unused"), (8, 8, 1), 10)
    assert list(export.centre_placement(g.centres)) == ["ps 0"]
    assert len(export.centre_placement(g.centres)["ps 0"]) == 4


def test_the_parameter_servers_write_and_read_the_checkpoints():
    io_types = ("SaveV2", "RestoreV2", "MergeV2Checkpoints")
    # The checkpoint saver is sharded: each ps saves (and restores) the variables it holds
    # with ops on its own device, so the files are written by, and read by, the parameter
    # servers; the chief writes only the `checkpoint` file that names the latest. A
    # multi-machine job therefore needs a --model_dir that every task reaches.
    chief = cluster.TaskConfig(("p0:1", "p1:1"), ("w0:1", "w1:1"), "worker", 0)
    g = graph.build_worker_graph(chief, _config("/unused"), (8, 8, 1), 10)
    scope = g.saver.saver_def.save_tensor_name.split("/")[0]
    by_type = {}
    for op in g.graph.get_operations():
        if op.name.startswith(scope + "/") and op.type in io_types:
            by_type.setdefault(op.type, set()).add(_job_and_task(op.device))
    assert by_type == {
        "SaveV2": {"/job:ps/task:0", "/job:ps/task:1"},
        "RestoreV2": {"/job:ps/task:0", "/job:ps/task:1"},
        "MergeV2Checkpoints": {"/job:ps/task:1"},  # Beside the last shard.
    }


@pytest.mark.parametrize(
    ("name", "kind", "after_one_step"),
    [
        # One step on loss = x from x = 1 (gradient 1) with learning rate 0.1:
        # sgd: 1 - 0.1 = 0.9.
        ("sgd", tf.compat.v1.train.GradientDescentOptimizer, 0.9),
        # momentum 0.9: accumulator 1, x -= 0.1 * 1 -> 0.9.
        ("momentum", tf.compat.v1.train.MomentumOptimizer, 0.9),
        # Nesterov: x -= 0.1 * (1 + 0.9 * 1) -> 0.81.
        ("nesterov", tf.compat.v1.train.MomentumOptimizer, 0.81),
        # Adam's first step is learning_rate * sign(gradient) (bias-corrected): 0.9.
        ("adam", tf.compat.v1.train.AdamOptimizer, 0.9),
        # Adagrad: accumulator 0.1 + 1, x -= 0.1 * 1 / sqrt(1.1).
        ("adagrad", tf.compat.v1.train.AdagradOptimizer, 1 - 0.1 / 1.1**0.5),
        # RMSProp (decay 0.9, from ms = 1): ms = 0.9 + 0.1 = 1, x -= 0.1 / sqrt(1).
        ("rmsprop", tf.compat.v1.train.RMSPropOptimizer, 0.9),
    ],
)
def test_make_optimizer(name, kind, after_one_step):
    with tf.Graph().as_default():
        optimizer = graph.make_optimizer(name, 0.1)
        assert type(optimizer) is kind
        x = tf.compat.v1.get_variable("x", initializer=1.0)
        step = optimizer.minimize(x)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(step)
            assert session.run(x) == pytest.approx(after_one_step, rel=1e-5)


def test_make_optimizer_rejects_unknown_names():
    with pytest.raises(ValueError, match=r"optimizer must be one of \[.*\], got 'lbfgs'"):
        graph.make_optimizer("lbfgs", 0.1)


def test_flag_choices_match_what_the_task_builds():
    # config.py repeats the model names so that flag parsing needs no TensorFlow.
    assert MODELS == models.MODELS
    with tf.Graph().as_default():
        for name in OPTIMIZERS:
            graph.make_optimizer(name, 0.1)


def test_centre_digest_changes_with_any_value_name_or_dtype():
    a = {"c/w": np.arange(6, dtype=np.float32).reshape(2, 3), "c/b": np.zeros(3, np.float32)}
    same = {name: value.copy() for name, value in reversed(a.items())}
    assert export.centre_digest(a) == export.centre_digest(same)  # Order of the dict: no matter.
    one_bit = dict(a, **{"c/b": np.array([0, 0, np.float32(1e-45)], np.float32)})
    assert export.centre_digest(one_bit) != export.centre_digest(a)
    assert export.centre_digest({"c/v": a["c/w"], "c/b": a["c/b"]}) != export.centre_digest(a)
    assert export.centre_digest(dict(a, **{"c/b": np.zeros(3, np.float64)})) != (
        export.centre_digest(a)
    )
