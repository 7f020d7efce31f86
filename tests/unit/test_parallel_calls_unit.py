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
def test_no_call_waits_for_another(world, ps_tasks):
    # Built without servers: every task's calls (both transports) are in the train op, and
    # none has another task's call among what it waits for.
    with tf.Graph().as_default():
        _, train_op, *_ = _build(UNIT_CLUSTER, ps_tasks, "", ElasticAverageOptimizer)
        calls = [op for op in _closure(train_op) if "exchange_with_ps_" in op.name]
        calls = [op for op in calls if op.type == "StatefulPartitionedCall"]
        assert len(calls) == 2 * ps_tasks
        for call in calls:
            task = call.name.split("exchange_with_ps_")[1].split("_")[0]
            before = _closure(call) - {call}
            others = [op.name for op in before if "exchange_with_ps_" in op.name
                      and op.type == "StatefulPartitionedCall"]  # fmt: skip
            assert others == [], f"the call to ps {task} waits for {others}"


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
