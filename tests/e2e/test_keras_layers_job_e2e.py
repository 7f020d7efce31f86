"""End-to-end tests (ps and worker OS processes): a TF1 script whose model is made of
tf.keras layers.

The tests of its other tiers are in tests/subprocess/test_keras_layers_job.py.
"""

import importlib.util
import time

import legacy_jobs
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

SCRIPT = """
import os
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import argparse

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tf_contrib_easgd

tf.compat.v1.disable_v2_behavior()
parser = argparse.ArgumentParser()
for flag in ("job_name", "ps_hosts", "worker_hosts", "checkpoint_dir", "layers"):
    parser.add_argument(f"--{flag}")
parser.add_argument("--task_index", type=int)
parser.add_argument("--train_steps", type=int)
FLAGS = parser.parse_args()
cluster = tf.compat.v1.train.ClusterSpec(
    {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
server = tf.compat.v1.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
if FLAGS.job_name == "ps":
    server.join()
digits = load_digits()
images, labels = (digits.data / 16.0).astype(np.float32)[:1500], digits.target[:1500]
worker_device = "/job:worker/task:%d" % FLAGS.task_index
getter = tf_contrib_easgd.ElasticAverageCustomGetter(worker_device=worker_device)
tf.compat.v1.set_random_seed(FLAGS.task_index)


def dense(inputs, units, name, activation):
    if FLAGS.layers == "keras":
        return tf.keras.layers.Dense(units, activation=activation, name=name)(inputs)
    kernel = tf.compat.v1.get_variable(
        name + "/kernel", [inputs.shape[-1], units],
        initializer=tf.compat.v1.glorot_uniform_initializer())
    bias = tf.compat.v1.get_variable(
        name + "/bias", [units], initializer=tf.compat.v1.zeros_initializer())
    outputs = tf.matmul(inputs, kernel) + bias
    return activation(outputs) if activation else outputs


with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster)), \\
        tf.compat.v1.variable_scope("", custom_getter=getter), \\
        getter.variable_creator_scope():
    x = tf.compat.v1.placeholder(tf.float32, [None, 64])
    y = tf.compat.v1.placeholder(tf.int64, [None])
    logits = dense(dense(x, 64, "hidden", tf.nn.relu), 10, "logits", None)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    global_step = tf.compat.v1.train.get_or_create_global_step()
    opt = tf_contrib_easgd.ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.5), num_worker=2,
        ea_custom_getter=getter, communication_period=8)
    train_op = opt.minimize(loss, global_step=global_step)
hook = opt.make_session_run_hook(FLAGS.task_index == 0, FLAGS.task_index)
scaffold = tf.compat.v1.train.Scaffold(saver=opt.swapping_saver())
config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", worker_device])
rng = np.random.RandomState(FLAGS.task_index)
with tf_contrib_easgd.MonitoredTrainingSession(
        master=server.target, is_chief=FLAGS.task_index == 0,
        checkpoint_dir=FLAGS.checkpoint_dir, scaffold=scaffold, hooks=[hook],
        config=config) as sess:
    print("Worker %d: session ready" % FLAGS.task_index, flush=True)
    for _ in range(FLAGS.train_steps):
        batch = rng.randint(0, len(images), 32)
        sess.run(train_op, {x: images[batch], y: labels[batch]})
print("Worker %d: done" % FLAGS.task_index, flush=True)
"""


TRAIN_STEPS = 600


CHIEF_READY_TIMEOUT_S = 150


TRAINING_TIMEOUT_S = 240


def _centre_accuracy(checkpoint_dir):
    """The test accuracy of the centre the chief saved, evaluated with numpy."""
    reader = tf.train.load_checkpoint(str(checkpoint_dir))
    digits = load_digits()
    images = (digits.data / 16.0)[1500:]
    hidden = np.maximum(
        images @ reader.get_tensor("hidden/kernel") + reader.get_tensor("hidden/bias"), 0
    )
    logits = hidden @ reader.get_tensor("logits/kernel") + reader.get_tensor("logits/bias")
    return float(np.mean(logits.argmax(axis=1) == digits.target[1500:]))


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="needs tf-keras")
@pytest.mark.timeout(2 * (CHIEF_READY_TIMEOUT_S + TRAINING_TIMEOUT_S))
def test_a_keras_layer_script_reaches_the_accuracy_of_its_get_variable_twin(tmp_path):
    accuracies = {}
    for layers in ("keras", "get_variable"):
        folder = tmp_path / layers
        folder.mkdir()
        (folder / "trainer.py").write_text(SCRIPT)
        processes = legacy_jobs.Processes(folder)
        started = time.monotonic()
        try:
            processes.run_ps_and_two_workers(
                "trainer.py",
                [f"--layers={layers}", f"--train_steps={TRAIN_STEPS}", "--checkpoint_dir=ckpt"],
                CHIEF_READY_TIMEOUT_S,
                TRAINING_TIMEOUT_S,
            )
        finally:
            processes.kill_all()
        reader = tf.train.load_checkpoint(str(folder / "ckpt"))
        names = set(reader.get_variable_to_shape_map())
        assert {"hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias"} <= names
        accuracies[layers] = _centre_accuracy(folder / "ckpt")
        print(f"{layers}: centre accuracy {accuracies[layers]:.3f}, "
              f"{time.monotonic() - started:.0f} s")  # fmt: skip
    # 600 steps of batch 32 per worker, lr 0.5, tau 8 (the chief may finish before worker 1
    # has started). Runs here: at 400 steps keras 0.882 and get_variable 0.859; at 600
    # steps keras 0.872, get_variable 0.882. Chance is 0.1; a centre Keras left alone (never
    # exchanged, as contrib left it) stays at its initial value, near chance. The
    # asynchrony of two processes moves a run by a few points.
    assert accuracies["get_variable"] > 0.8, accuracies
    assert accuracies["keras"] > accuracies["get_variable"] - 0.05, accuracies
