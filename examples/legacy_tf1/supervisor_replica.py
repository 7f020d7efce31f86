# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""EASGD replicas under a `tf.train.Supervisor`, in 2018 TF1 style.

Left in TensorFlow 1.x form on purpose. Before `MonitoredTrainingSession`, distributed
replica scripts got their session from a `Supervisor`:

* the chief's `Supervisor` initialises the model (or restores the latest checkpoint of its
  logdir), the others wait for it, polling every `recovery_wait_secs`;
* a `Supervisor` runs no session hooks, so the script runs the optimizer's init op itself
  once its session is ready, as contrib asked of scripts without the EASGD hook;
* batches are fed from numpy arrays, and the loop asks `sv.should_stop()`.

It learns scikit-learn's 8x8 digits with a one-hidden-layer perceptron. One parameter server
and two workers, started by hand:

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python supervisor_replica.py --job_name=ps --task_index=0 $HOSTS
    python supervisor_replica.py --job_name=worker --task_index=0 $HOSTS
    python supervisor_replica.py --job_name=worker --task_index=1 $HOSTS

On TF 2 it runs after `tf_upgrade_v2` and `easgd-migrate` with no hand edits (README.md
beside this file; tests/e2e/test_legacy_corpus.py does that); easgd-migrate notes what the
Supervisor does to the centre, and what to use instead.
"""

from __future__ import absolute_import, division, print_function

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "job name: worker or ps")
flags.DEFINE_integer("task_index", None, "Worker task index, should be >= 0.")
flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "Worker hostname:port pairs")
flags.DEFINE_integer("train_steps", 600, "Number of (local) training steps to perform")
flags.DEFINE_integer("batch_size", 32, "Training batch size")
flags.DEFINE_float("learning_rate", 0.5, "Learning rate")
flags.DEFINE_string("train_dir", "/tmp/easgd_supervisor", "Directory for the Supervisor's files")
FLAGS = flags.FLAGS

NUM_TRAIN = 1500
HIDDEN_UNITS = 64


def main(unused_argv):
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)

    ps_spec = FLAGS.ps_hosts.split(",")
    worker_spec = FLAGS.worker_hosts.split(",")
    num_workers = len(worker_spec)
    cluster = tf.train.ClusterSpec({"ps": ps_spec, "worker": worker_spec})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()

    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index
    ea_getter = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        x = tf.placeholder(tf.float32, [None, 64])
        y_ = tf.placeholder(tf.int64, [None])
        with tf.variable_scope("replica", custom_getter=ea_getter):
            hid_w = tf.get_variable(
                "hid_w", [64, HIDDEN_UNITS], initializer=tf.truncated_normal_initializer(stddev=0.1)
            )
            hid_b = tf.get_variable("hid_b", [HIDDEN_UNITS], initializer=tf.zeros_initializer())
            sm_w = tf.get_variable(
                "sm_w", [HIDDEN_UNITS, 10], initializer=tf.truncated_normal_initializer(stddev=0.1)
            )
            sm_b = tf.get_variable("sm_b", [10], initializer=tf.zeros_initializer())
        hid = tf.nn.relu(tf.nn.xw_plus_b(x, hid_w, hid_b))
        logits = tf.nn.xw_plus_b(hid, sm_w, sm_b)
        cross_entropy = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_, logits=logits)
        )
        correct = tf.equal(tf.argmax(logits, 1), y_)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

        global_step = tf.Variable(0, name="global_step", trainable=False)
        opt = tf.contrib.opt.ElasticAverageOptimizer(
            opt=tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
            num_worker=num_workers,
            ea_custom_getter=ea_getter,
            communication_period=8,
        )
        train_step = opt.minimize(cross_entropy, global_step=global_step)
        easgd_init_op = opt.get_init_op(FLAGS.task_index)
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(
        is_chief=is_chief,
        logdir=FLAGS.train_dir,
        init_op=init_op,
        recovery_wait_secs=1,
        global_step=global_step,
    )
    sess_config = tf.ConfigProto(
        allow_soft_placement=True, device_filters=["/job:ps", worker_device]
    )
    sess = sv.prepare_or_wait_for_session(server.target, config=sess_config)
    sess.run(easgd_init_op)
    print("Worker %d: session ready" % FLAGS.task_index, flush=True)

    rng = np.random.RandomState(FLAGS.task_index)
    local_step = 0
    while local_step < FLAGS.train_steps and not sv.should_stop():
        batch = rng.randint(0, NUM_TRAIN, FLAGS.batch_size)
        sess.run(train_step, feed_dict={x: images[batch], y_: labels[batch]})
        local_step += 1

    test_feed = {x: images[NUM_TRAIN:], y_: labels[NUM_TRAIN:]}
    print(
        "Worker %d: test accuracy %.4f after %d steps"
        % (FLAGS.task_index, sess.run(accuracy, feed_dict=test_feed), local_step),
        flush=True,
    )
    sv.stop()


if __name__ == "__main__":
    tf.app.run()
