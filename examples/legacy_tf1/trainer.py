# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""Between-graph replicated TF1 trainer with Elastic Averaging SGD, as written in 2018.

This file is deliberately left in TensorFlow 1.x form (it uses `tf.contrib`, `tf.app.flags`,
`tf.train.*`, `tf.device(<device function>)`): it is the "before" of docs/MIGRATING.md.
On TF 1.x it runs as it is; on TF 2 it runs after

    tf_upgrade_v2 --infile trainer.py --outfile trainer.py
    easgd-migrate trainer.py

with no hand edits (tests/tools/test_legacy_example.py does exactly that on a copy).

A small multilayer perceptron learns scikit-learn's 8x8 digits (1797 images, shipped with
scikit-learn, no download). One parameter server and two workers, started by hand:

    python trainer.py --job_name=ps --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224
    python trainer.py --job_name=worker --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224
    python trainer.py --job_name=worker --task_index=1 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224

Each worker prints the test accuracy of its own copy of the model when it is done; the chief
(worker 0) also writes the centre variables under their plain names to --checkpoint_dir.
"""

from __future__ import absolute_import, division, print_function

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

flags = tf.app.flags
flags.DEFINE_string("job_name", "", "Either 'ps' or 'worker'.")
flags.DEFINE_integer("task_index", 0, "Index of this task within its job.")
flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated host:port of the ps job.")
flags.DEFINE_string(
    "worker_hosts", "localhost:2223,localhost:2224", "Comma-separated host:port of the workers."
)
flags.DEFINE_integer("train_steps", 1000, "Local training steps of each worker.")
flags.DEFINE_integer("batch_size", 32, "Examples per local step.")
flags.DEFINE_float("learning_rate", 0.5, "Learning rate of the SGD steps of each worker.")
flags.DEFINE_integer("communication_period", 8, "Local steps between two elastic updates.")
flags.DEFINE_string("checkpoint_dir", "/tmp/easgd_digits", "Where the chief saves checkpoints.")
FLAGS = flags.FLAGS

NUM_TRAIN = 1500  # The remaining 297 digits are the test set.
HIDDEN_UNITS = 64


def load_data():
    """Returns ((train_images, train_labels), (test_images, test_labels)), images in [0, 1]."""
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    return (images[:NUM_TRAIN], labels[:NUM_TRAIN]), (images[NUM_TRAIN:], labels[NUM_TRAIN:])


def inference(images):
    """A two-layer perceptron; every variable comes from tf.get_variable (for the getter)."""
    with tf.variable_scope("mlp"):
        w1 = tf.get_variable(
            "w1", [64, HIDDEN_UNITS], initializer=tf.truncated_normal_initializer(stddev=0.1)
        )
        b1 = tf.get_variable("b1", [HIDDEN_UNITS], initializer=tf.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(images, w1) + b1)
        w2 = tf.get_variable(
            "w2", [HIDDEN_UNITS, 10], initializer=tf.truncated_normal_initializer(stddev=0.1)
        )
        b2 = tf.get_variable("b2", [10], initializer=tf.zeros_initializer())
        return tf.matmul(hidden, w2) + b2


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return

    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index
    (train_images, train_labels), (test_images, test_labels) = load_data()

    # Each worker trains its own copy of the variables; the centre lives on the ps.
    ea_custom = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)
    device_setter = tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)
    with tf.device(device_setter), tf.variable_scope("", custom_getter=ea_custom):
        images = tf.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        logits = inference(images)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        correct = tf.equal(tf.argmax(logits, 1), labels)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.contrib.opt.ElasticAverageOptimizer(
            opt=tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
            num_worker=len(worker_hosts),
            ea_custom_getter=ea_custom,
            communication_period=FLAGS.communication_period,
        )
        train_op = opt.minimize(loss, global_step=global_step)

    easgd_hook = opt.make_session_run_hook(is_chief, FLAGS.task_index)
    # The centre is saved under the variables' own names, for a plain model to restore.
    scaffold = tf.train.Scaffold(saver=opt.swapping_saver())
    # Talk to the ps and to this worker only, so that no worker waits for the others.
    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    rng = np.random.RandomState(FLAGS.task_index)
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.checkpoint_dir,
        scaffold=scaffold,
        hooks=[easgd_hook],
        config=config,
    ) as sess:
        print("Worker %d: session ready" % FLAGS.task_index, flush=True)
        step = 0
        while not sess.should_stop() and step < FLAGS.train_steps:
            batch = rng.randint(0, len(train_images), FLAGS.batch_size)
            _, loss_value = sess.run(
                [train_op, loss],
                feed_dict={images: train_images[batch], labels: train_labels[batch]},
            )
            step += 1
            if step % 200 == 0:
                tf.logging.info("Worker %d: step %d, loss %.4f", FLAGS.task_index, step, loss_value)
        test_accuracy = sess.run(accuracy, feed_dict={images: test_images, labels: test_labels})
        message = "Worker %d: test accuracy %.4f after %d steps"
        print(message % (FLAGS.task_index, test_accuracy, step), flush=True)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run()
