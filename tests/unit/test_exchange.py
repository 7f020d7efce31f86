"""The exchange design (tf_contrib_easgd/exchange/elastic_exchange.py): nothing remote on a
non-exchange step.

Placement tests need no server; the RunMetadata tests
(tests/cluster/test_exchange_cluster.py) run one worker of the shared in-process cluster and
read what the session actually ran.
"""

import numpy as np
import pytest
import tensorflow as tf
from exchange_graphs import WORKER
from exchange_graphs import build_worker as _build

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange import elastic_exchange as exchange_module
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange
from tf_contrib_easgd.exchange.gating import run_if

CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222"]})


def _closure(op):
    """Every op the session needs to run `op` (data and control inputs, transitively)."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        stack.extend(t.op for t in current.inputs)
        stack.extend(current.control_inputs)
    return seen


@pytest.mark.parametrize("period", [1, 10])
def test_train_op_has_no_op_on_a_parameter_server(world, period):
    with tf.Graph().as_default() as graph:
        getter, _, global_step, _, train_op = _build(CLUSTER, period=period)
        # The centres and the global step do live on the ps tasks ...
        centres = [e.global_center for e in getter.centered_variables()]
        assert {tf.DeviceSpec.from_string(v.device).job for v in centres} == {"ps"}
        assert tf.DeviceSpec.from_string(global_step.device).job == "ps"
        # ... but the session runs nothing there for the train op: the exchange is a call.
        jobs = {tf.DeviceSpec.from_string(op.device).job for op in _closure(train_op)}
        assert jobs == {"worker"}
        # One call op per ps task and transport (transport.py), of a function that holds the
        # worker's whole exchange with that task: a step that does not exchange skips a few
        # ops, however many variables there are. The functions are never inlined into the
        # step's graph, where a direct call would give it a ps partition.
        calls = [op for op in _closure(train_op) if op.type == "StatefulPartitionedCall"]
        assert sorted(op.name.rsplit("/", 1)[-1] for op in calls) == [
            "exchange_with_ps_0",
            "exchange_with_ps_0_direct",
            "exchange_with_ps_1",
            "exchange_with_ps_1_direct",
        ]
        library = {f.signature.name: f for f in graph.as_graph_def().library.function}
        for op in calls:
            function = library[op.get_attr("f").name]
            assert function.attr["_noinline"].b
            # Every op but the Identity/NoOp/Const that tf.function adds around the outputs.
            nodes = [n for n in function.node_def if n.op not in ("Identity", "NoOp", "Const")]
            jobs = {tf.DeviceSpec.from_string(n.device).job for n in nodes}
            remote_calls = [n for n in nodes if n.op == "RemoteCall"]
            if op.name.endswith("_direct"):
                # The task's half pinned to the ps task, the worker's half on the worker.
                assert jobs == {"ps", "worker"}, jobs
                assert remote_calls == []
            else:
                # The worker's half, and one RemoteCall of the task's half.
                assert jobs == {"worker"}, jobs
                assert len(remote_calls) == 1
                targets = [
                    n.attr["value"].tensor.string_val
                    for n in function.node_def
                    if n.op == "Const" and n.attr["dtype"].type == tf.string.as_datatype_enum
                ]
                task = op.name.rsplit("_", 1)[-1]  # exchange_with_ps_<task>
                assert targets == [[f"/job:ps/replica:0/task:{task}".encode()]]


def test_one_call_per_task_in_a_fixed_order(world):
    # Two variables round-robin over two ps tasks, the global step after them: two calls,
    # ps 0 first (it has the first centre), each carrying its own centres.
    with tf.Graph().as_default():
        getter, _, global_step, _, _ = _build(CLUSTER)
        exchange = ElasticExchange(getter.centered_variables(), WORKER, 0.5, global_step, True)
        assert exchange.remote_targets == ["/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"]


def test_centres_on_the_worker_need_no_call(world):
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("")
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            tf.compat.v1.get_variable("w", [2])
        exchange = ElasticExchange(getter.centered_variables(), "", 0.5, None, True)
        assert exchange.remote_targets == []


def _local_trajectory(steps=4):
    """Trains w (init [3, -1], loss sum(w^2)) for `steps` steps at period 2 with no cluster;
    returns (the type of the ops that exchange, w, the global centre, the global step)."""
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("")
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant([3.0, -1.0]))
            global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.25),
            1,
            getter,
            communication_period=2,
            moving_rate=0.5,
            rho=0.0,
        )
        train_op = opt.minimize(tf.reduce_sum(tf.square(w)), global_step=global_step)
        centre = getter.find(w).global_center
        exchange_ops = {op.type for op in graph.get_operations() if "exchange_if_due" in op.name}
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            for _ in range(steps):
                session.run(train_op)
            return (
                exchange_ops,
                *session.run([w.read_value(), centre.read_value(), global_step.read_value()]),
            )


def test_centres_the_exchange_cannot_address_take_ordinary_ops(world, monkeypatch):
    # The worker's own centres go through one function call that finds them by name; a
    # variable of a kind it cannot address (here: every one, by pretence) takes the same
    # arithmetic with ordinary ops, to the same bits.
    by_function = _local_trajectory()
    monkeypatch.setattr(exchange_module, "is_addressable", lambda variable: False)
    by_ops = _local_trajectory()
    assert "StatefulPartitionedCall" in by_function[0]
    assert "StatefulPartitionedCall" not in by_ops[0]
    assert {"AssignAdd", "AssignAddVariableOp"} & by_ops[0]
    # lr 0.25 on sum(w^2) halves w each step: [3, -1] -> [0.75, -0.25] after two steps;
    # d = 0.5 * ([0.75, -0.25] - [3, -1]) = [-1.125, 0.375]: w = [1.875, -0.625] = centre.
    # Two more steps: w = [0.46875, -0.15625]; d = 0.5 * (w - centre) = [-0.703125,
    # 0.234375]: w = centre = [1.171875, -0.390625]; two exchanges, global step 2.
    for result in (by_function, by_ops):
        np.testing.assert_array_equal(result[1], [1.171875, -0.390625])
        np.testing.assert_array_equal(result[2], [1.171875, -0.390625])
        assert result[3] == 2


@pytest.mark.parametrize("pred", [False, True])
def test_run_if_runs_the_branch_only_when_the_predicate_holds(world, pred):
    with tf.Graph().as_default():
        counter = tf.compat.v1.get_variable(
            "counter", [], tf.int32, tf.compat.v1.zeros_initializer()
        )

        def branch():
            with tf.control_dependencies([tf.compat.v1.assign_add(counter, 1)]):
                return tf.constant(True)

        done = run_if(tf.constant(pred), branch)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            assert session.run(done) == pred
            assert session.run(counter.read_value()) == int(pred)
