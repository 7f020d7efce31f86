"""Unit tests (no server, no child process): an exchange's calls to its ps tasks, in flight
together.

The tests of its other tiers are in tests/cluster/test_parallel_calls.py.
"""

import pytest
import tensorflow as tf
from held_exchanges import build as _build

from tf_contrib_easgd import ElasticAverageOptimizer

UNIT_CLUSTER = tf.train.ClusterSpec(
    {"ps": [f"ps{i}:2222" for i in range(4)], "worker": ["w0:2222"]}
)


@pytest.mark.parametrize("ps_tasks", [2, 4])
def test_no_direct_call_waits_for_another_and_remote_calls_go_in_turn(world, ps_tasks):
    # Built without servers: every task's calls (both transports) are in the train op. No
    # direct call has another call among what it waits for; the RemoteCall of task k waits
    # for those of tasks 0..k-1 and for no direct call (TensorFlow aborts now and then when
    # one step starts RemoteCalls to several targets at once).
    with tf.Graph().as_default():
        _, train_op, *_ = _build(UNIT_CLUSTER, ps_tasks, "", ElasticAverageOptimizer)
        calls = [op for op in _closure(train_op) if "exchange_with_ps_" in op.name]
        calls = [op for op in calls if op.type == "StatefulPartitionedCall"]
        assert len(calls) == 2 * ps_tasks
        for call in calls:
            task = int(call.name.split("exchange_with_ps_")[1].split("_")[0])
            before = _closure(call) - {call}
            others = sorted(
                op.name.split("/")[-1] for op in before
                if "exchange_with_ps_" in op.name and op.type == "StatefulPartitionedCall"
            )  # fmt: skip
            if call.name.endswith("_direct"):
                assert others == [], f"the direct call to ps {task} waits for {others}"
            else:
                expected = [f"exchange_with_ps_{k}" for k in range(task)]
                assert others == expected, f"the RemoteCall to ps {task} waits for {others}"


def _closure(op):
    """Every op that `op` waits for (data and control inputs, transitively), and `op`."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(t.op for t in current.inputs)
            stack.extend(current.control_inputs)
    return seen


@pytest.mark.parametrize("wire_dtype", [None, "bfloat16"], ids=["float32", "bfloat16"])
def test_a_direct_calls_replies_wait_for_no_value_and_no_update(world, wire_dtype):
    # In each direct call's function, the tensors the task sends back (ps ops that a worker
    # op reads) wait for no value of the worker's and for no update: of the worker, they
    # wait at most for the variable handles (a function runs its stateful ops in the order
    # they were built, handles among them); of the task, for no Apply* or Assign* op. So
    # the centres come back while the values go out. Two tasks, w_i's centre on ps i, the
    # global step on ps 0 (read after its moves, and sent back only to end a RemoteCall).
    with tf.Graph().as_default() as graph:
        _build(UNIT_CLUSTER, 2, "", ElasticAverageOptimizer, wire_dtype=wire_dtype)
    functions = [
        function for function in graph.as_graph_def().library.function
        if "_direct" in function.signature.name and "exchange_with_task" in function.signature.name
    ]  # fmt: skip
    assert len(functions) == 2
    for function in functions:
        nodes = {node.name: node for node in function.node_def}
        replies = {
            source
            for node in nodes.values()
            if node.device.startswith("/job:worker")
            for source in map(_source, _data_inputs(node))
            if source in nodes and "/job:ps" in nodes[source].device
        }
        replies -= {name for name in replies if _reads_the_step(nodes, name)}
        assert len(replies) == 1, replies  # One variable per task.
        for name in _ancestors(nodes, replies):
            node = nodes[name]
            if node.device.startswith("/job:worker"):
                assert node.op in ("VarHandleOp", "VariableV2"), (name, node.op)
            else:
                assert "Apply" not in node.op and "Assign" not in node.op, (name, node.op)


def _source(input_name):
    """The node an input of a FunctionDef's node comes from ("^name", "name:output:0")."""
    return input_name.lstrip("^").split(":")[0]


def _data_inputs(node):
    """The inputs of a FunctionDef's node that carry a tensor (not "^name")."""
    return [name for name in node.input if not name.startswith("^")]


def _ancestors(nodes, names):
    """The nodes of a FunctionDef that any of `names` waits for, and `names`."""
    seen, stack = set(), list(names)
    while stack:
        name = stack.pop()
        if name in nodes and name not in seen:
            seen.add(name)
            stack.extend(map(_source, nodes[name].input))
    return seen


def _reads_the_step(nodes, name):
    """Whether ps node `name` reads the global step (its handle's shared name)."""
    return any(
        "global_step" in nodes[ancestor].attr["shared_name"].s.decode()
        for ancestor in _ancestors(nodes, [name])
        if nodes[ancestor].op in ("VarHandleOp", "VariableV2")
        and nodes[ancestor].device == nodes[name].device
    )
