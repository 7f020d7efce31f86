"""The benchmarks' worker graphs over two ps tasks (benchmarks/common/graphs.py): the
setter spreads the centres round-robin, and `SessionWorker.placement` (models.py) says
where, as the contrib side by side checks on both sides. Graphs only, no server.
"""

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


def test_the_centres_go_round_robin_over_both_ps_tasks(world):
    # mlp-25K makes layer_0/weights, layer_0/biases, layer_1/weights, layer_1/biases, then
    # global_step: the 1st, 3rd and 5th variable on a ps go to ps0, the 2nd and 4th to ps1.
    assert _placement("easgd-10") == {
        "global_center_variable/layer_0/weights": 0,
        "global_center_variable/layer_0/biases": 1,
        "global_center_variable/layer_1/weights": 0,
        "global_center_variable/layer_1/biases": 1,
        "global_step": 0,
    }


def test_local_sgd_puts_nothing_on_a_ps_task(world):
    assert _placement("local") == {}


def test_async_sgd_spreads_the_variables_themselves(world):
    # No getter: the model's own variables, then global_step, round-robin.
    assert _placement("async") == {
        "layer_0/weights": 0,
        "layer_0/biases": 1,
        "layer_1/weights": 0,
        "layer_1/biases": 1,
        "global_step": 0,
    }
