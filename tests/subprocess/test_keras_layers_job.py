"""A TF1 script whose model is made of tf.keras layers trains as well as its get_variable twin.

The script below is a migrated TF1 EASGD trainer (tf.compat.v1, tf_contrib_easgd,
TF_USE_LEGACY_KERAS=1 so that `tf.keras` is tf-keras) whose two-layer perceptron is built
either with `tf.keras.layers.Dense` inside `getter.variable_creator_scope()` or with
`tf.compat.v1.get_variable`, under the same names. Each runs as a real job: one ps and two
workers, separate OS processes on loopback ports. The chief saves the centre with
`swapping_saver` under the plain names; this test evaluates it with numpy. Last, a short
script with `tf.keras` as TF1 scripts have it, with and without the getter's scope.
"""

import importlib.util

import pytest
from processes import run_python_script

# --- tf.keras as a TF1 script has it --------------------------------------------------------
# `tf.keras` is tf-keras only with TF_USE_LEGACY_KERAS=1 set before TensorFlow is first
# imported (easgd-migrate sets it in scripts that need it): a fresh interpreter each.
TF_KERAS_SCRIPT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import contextlib
import tensorflow as tf
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

tf.compat.v1.disable_v2_behavior()
getter = ElasticAverageCustomGetter("/job:worker/task:0")
creator = getter.variable_creator_scope() if {with_creator} else contextlib.nullcontext()
with tf.compat.v1.variable_scope("", custom_getter=getter), creator:
    x = tf.compat.v1.placeholder(tf.float32, [None, 4])
    loss = tf.reduce_sum(tf.keras.layers.Dense(3)(x))
    step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), num_worker=1, ea_custom_getter=getter
    )
    graph = tf.compat.v1.get_default_graph()
    ops_before = len(graph.get_operations())
    try:
        optimizer.minimize(loss, global_step=step)
    except ValueError as error:
        print("ValueError:", error)
print("keras:", type(tf.keras.layers.Dense(1)).__module__.split(".")[0])
print("through the getter:", sorted(e.worker.op.name for e in getter.centered_variables()))
print("minimize added ops:", len(graph.get_operations()) > ops_before)
"""


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="needs tf-keras")
@pytest.mark.parametrize("with_creator", [True, False], ids=["in the scope", "without"])
def test_a_tf1_script_with_tf_keras_layers(tmp_path, with_creator):
    done = run_python_script(TF_KERAS_SCRIPT.format(with_creator=with_creator), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "keras: tf_keras" in done.stdout
    if with_creator:
        assert "through the getter: ['dense/bias', 'dense/kernel']" in done.stdout
        assert "minimize added ops: True" in done.stdout
        assert "ValueError" not in done.stdout
    else:
        # Keras made its variables without the getter (TF 1.15 too: contrib skipped them
        # silently); the optimizer refuses them before it builds anything, and says why.
        assert "ValueError: Variable 'dense/kernel:0' was not created through" in done.stdout
        assert "build them inside `with getter.variable_creator_scope():`" in done.stdout
        assert "through the getter: []" in done.stdout
        assert "minimize added ops: False" in done.stdout
