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
