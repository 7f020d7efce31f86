"""Tests with a child process (a console script, a fresh interpreter):
ElasticAverageCallback, Keras model.fit under EASGD.

The tests of its other tiers are in tests/unit/test_keras_callback.py.
"""

import importlib
import importlib.util
import json

import numpy as np
import pytest
from processes import run_python_script

# --- tf-keras (Keras 2), in a fresh interpreter ---------------------------------------------
# `tf.keras` is tf-keras only with TF_USE_LEGACY_KERAS=1 set before TensorFlow's first
# import: the same exchange as above, in a process of its own.
TF_KERAS_SCRIPT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import json
import numpy as np
import portpicker
import tensorflow as tf
from tf_contrib_easgd import cluster_from_hosts
from tf_contrib_easgd.keras import ElasticAverageCallback

ps, worker = (f"localhost:{portpicker.pick_unused_port()}" for _ in range(2))
task = cluster_from_hosts("worker", 0, ps, worker)
ps_server = tf.distribute.Server(task.cluster_spec(), job_name="ps", task_index=0)
model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(
    1, kernel_initializer=tf.keras.initializers.Constant(0.5))])
model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
easgd = ElasticAverageCallback(task, 2, 0.5, timeout_secs=30)
rows = []
record = tf.keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: rows.append(
    [float(w) for w in np.concatenate([v.ravel() for v in model.get_weights()
                                       + easgd.centre_weights()])] + [easgd.global_step]))
model.fit(np.ones((3, 2)), np.zeros((3, 1)), batch_size=1, shuffle=False, verbose=0,
          callbacks=[easgd, record])
print("keras:", type(model).__module__.split(".")[0])
print("rows:", json.dumps(rows))
"""


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="needs tf-keras")
def test_tf_keras_makes_the_same_exchange(tmp_path):
    done = run_python_script(TF_KERAS_SCRIPT, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "keras: tf_keras" in done.stdout
    rows = json.loads(done.stdout.split("rows: ", 1)[1])
    # The rows of test_one_exchange_moves_worker_and_centre_by_the_same_d.
    np.testing.assert_allclose(
        rows,
        [
            (0.3, 0.3, -0.2, 0.5, 0.5, 0.0, 0),
            (0.36, 0.36, -0.14, 0.36, 0.36, -0.14, 1),
            (0.244, 0.244, -0.256, 0.36, 0.36, -0.14, 1),
        ],
        rtol=1e-6,
        atol=1e-7,
    )
