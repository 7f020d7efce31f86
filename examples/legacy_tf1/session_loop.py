# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""EASGD in a plain `tf.Session` loop, in 2018 TF1 style, with a vendored optimizer module.

Left in TensorFlow 1.x form on purpose. Unlike trainer.py it uses no monitored session:

* it imports the optimizer from the project's own copy of contrib's module (easgd_local.py);
* the global step is a plain `tf.Variable`;
* the chief initialises the global variables, the other workers wait until it has, then every
  worker runs the optimizer's init op by hand;
* summaries go through `tf.summary.merge_all` and a `tf.summary.FileWriter`;
* the chief saves the centre with the optimizer's swapping saver at the end.

It learns scikit-learn's 8x8 digits with a softmax-regression-plus-hidden-layer model. One
parameter server and two workers, started by hand:

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python session_loop.py --job_name=ps --task_index=0 $HOSTS
    python session_loop.py --job_name=worker --task_index=0 $HOSTS
    python session_loop.py --job_name=worker --task_index=1 $HOSTS

On TF 2 it runs after `tf_upgrade_v2` and `easgd-migrate` with no hand edits (README.md
beside this file; tests/e2e/test_legacy_corpus.py does that).
"""

from __future__ import absolute_import, division, print_function

import os
import time

import numpy as np
import tensorflow as tf
from easgd_local import ElasticAverageCustomGetter, ElasticAverageOptimizer
from sklearn.datasets import load_digits

tf.app.flags.DEFINE_string("job_name", "", "Either 'ps' or 'worker'.")
tf.app.flags.DEFINE_integer("task_index", 0, "Index of this task within its job.")
tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated ps host:port.")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "Worker host:port.")
tf.app.flags.DEFINE_integer("train_steps", 800, "Local training steps of each worker.")
tf.app.flags.DEFINE_integer("batch_size", 32, "Examples per local step.")
tf.app.flags.DEFINE_float("learning_rate", 0.5, "Learning rate of the SGD steps.")
tf.app.flags.DEFINE_integer("communication_period", 4, "Local steps between elastic updates.")
tf.app.flags.DEFINE_string("summaries_dir", "/tmp/easgd_session_loop", "Summaries and the model.")
FLAGS = tf.app.flags.FLAGS

NUM_TRAIN = 1500
WAIT_FOR_CHIEF_SECONDS = 300


def main(_):
    cluster = tf.train.ClusterSpec(
        {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")}
    )
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    num_workers = cluster.num_tasks("worker")
    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index

    digits = load_digits()
    all_images = (digits.data / 16.0).astype(np.float32)
    all_labels = digits.target.astype(np.int64)

    getter = ElasticAverageCustomGetter(worker_device=worker_device)
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        with tf.variable_scope("model", custom_getter=getter):
            x = tf.placeholder(tf.float32, [None, 64])
            y = tf.placeholder(tf.int64, [None])
            w1 = tf.get_variable("w1", [64, 32], initializer=tf.glorot_uniform_initializer())
            b1 = tf.get_variable("b1", [32], initializer=tf.zeros_initializer())
            w2 = tf.get_variable("w2", [32, 10], initializer=tf.glorot_uniform_initializer())
            b2 = tf.get_variable("b2", [10], initializer=tf.zeros_initializer())
            logits = tf.matmul(tf.nn.tanh(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        global_step = tf.Variable(0, name="global_step", trainable=False)
        optimizer = ElasticAverageOptimizer(
            opt=tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
            num_worker=num_workers,
            ea_custom_getter=getter,
            communication_period=FLAGS.communication_period,
        )
        train_op = optimizer.minimize(loss, global_step=global_step)
    tf.summary.scalar("loss", loss)
    tf.summary.histogram("w1", w1)
    merged = tf.summary.merge_all()
    init_global = tf.global_variables_initializer()
    init_local = tf.local_variables_initializer()
    not_ready = tf.report_uninitialized_variables(tf.global_variables())
    easgd_init = optimizer.get_init_op(FLAGS.task_index)
    saver = optimizer.swapping_saver()

    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    sess = tf.Session(server.target, config=config)
    if is_chief:
        sess.run(init_global)
    else:
        # The chief initialises the centre on the ps; wait for it (bounded).
        deadline = time.time() + WAIT_FOR_CHIEF_SECONDS
        while len(sess.run(not_ready)) and time.time() < deadline:
            time.sleep(0.5)
    sess.run(init_local)
    sess.run(easgd_init)
    print("Worker %d: session ready" % FLAGS.task_index, flush=True)

    writer = tf.summary.FileWriter(os.path.join(FLAGS.summaries_dir, "worker%d" % FLAGS.task_index))
    rng = np.random.RandomState(FLAGS.task_index)
    for step in range(1, FLAGS.train_steps + 1):
        batch = rng.randint(0, NUM_TRAIN, FLAGS.batch_size)
        feed = {x: all_images[batch], y: all_labels[batch]}
        if step % 50 == 0:
            _, summary = sess.run([train_op, merged], feed_dict=feed)
            writer.add_summary(summary, step)
        else:
            sess.run(train_op, feed_dict=feed)
    writer.close()

    test = {x: all_images[NUM_TRAIN:], y: all_labels[NUM_TRAIN:]}
    print(
        "Worker %d: test accuracy %.4f after %d steps"
        % (FLAGS.task_index, sess.run(accuracy, feed_dict=test), FLAGS.train_steps),
        flush=True,
    )
    if is_chief:
        saver.save(sess, os.path.join(FLAGS.summaries_dir, "model.ckpt"), global_step=global_step)
    sess.close()


if __name__ == "__main__":
    tf.app.run()
