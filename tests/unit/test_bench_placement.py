"""The benchmarks' worker graphs over two ps tasks (benchmarks/common/graphs.py): the
setter spreads the centres by bytes (`models.FewestBytesFirst`), and
`SessionWorker.placement` (models.py) says where, as the contrib side by side checks on
both sides. Graphs only, no server.
"""

import pytest
import tensorflow as tf

from benchmarks.common import graphs, models, protocol

#: Two ps tasks and two workers; nothing listens there: the graphs are only built.
CLUSTER = {"ps": ["localhost:1", "localhost:2"], "worker": ["localhost:3", "localhost:4"]}


def _placement(config):
    spec, batch = protocol.TINY_MLP, protocol.synthetic_batch(protocol.TINY_MLP)
    built = graphs.build(config, spec, tf.train.ClusterSpec(CLUSTER), 1, 2, 0.01,
                         lambda: tuple(map(tf.constant, batch)))  # fmt: skip
    worker = models.SessionWorker.__new__(models.SessionWorker)  # No server: the graph only.
    worker.built = built
    return worker.placement()["placement"]


def test_the_centres_go_to_the_ps_task_with_the_fewest_bytes(world):
    # mlp-25K makes layer_0/weights (784 * 32 floats: 100,352 bytes) -> ps0; then each next
    # variable to the lighter task, ps1: biases (128 bytes), layer_1/weights (32 * 10 * 4 =
    # 1,280), layer_1/biases (40) and global_step (8): ps1 stays far lighter than ps0.
    assert _placement("easgd-10") == {
        "global_center_variable/layer_0/weights": 0,
        "global_center_variable/layer_0/biases": 1,
        "global_center_variable/layer_1/weights": 1,
        "global_center_variable/layer_1/biases": 1,
        "global_step": 1,
    }


def test_local_sgd_puts_nothing_on_a_ps_task(world):
    assert _placement("local") == {}


def test_async_sgd_spreads_the_variables_themselves(world):
    # No getter: the model's own variables, then global_step, by bytes as above.
    assert _placement("async") == {
        "layer_0/weights": 0,
        "layer_0/biases": 1,
        "layer_1/weights": 1,
        "layer_1/biases": 1,
        "global_step": 1,
    }


def test_fewest_bytes_first_counts_shapes_and_dtypes():
    spread = models.FewestBytesFirst(2)
    with tf.Graph().as_default():
        constant = tf.constant([1.0, 2.0]).op  # No "shape" attr: 0 bytes.
        made = (("a", (10, 10), tf.float32), ("b", (50,), tf.float64), ("c", (3,), tf.int32))
        ops = [tf.compat.v1.get_variable(n, s, dtype=d).op for n, s, d in made]
        # a: 400 bytes -> task 0; b: 400 bytes -> task 1; tie 400/400 -> c to task 0 (12).
        assert [spread(op) for op in ops] == [0, 1, 0]
        assert spread.loads == [412, 400]
        assert models.variable_bytes(constant) == 0
    with pytest.raises(ValueError, match="num_tasks must be an int >= 1, got 0"):
        models.FewestBytesFirst(0)
