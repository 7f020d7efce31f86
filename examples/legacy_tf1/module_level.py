# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""A distributed EASGD tutorial written at module level, in 2018 TF1 style.

Left in TensorFlow 1.x form on purpose, the way many tutorials of the time were written:
no `main` and no `if __name__ == "__main__":`, everything runs on import, top to bottom:

* flags, the cluster and the server are made at module level, the ps `join()`s there;
* the input is a queue pipeline (`slice_input_producer` and `shuffle_batch`), whose queue
  runners `MonitoredTrainingSession` starts;
* the chief saves checkpoints to --checkpoint_dir and restores the latest one it finds there
  whenever its session is created.

It learns scikit-learn's 8x8 digits with a one-hidden-layer perceptron. One parameter server
and two workers, started by hand:

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python module_level.py --job_name=ps --task_index=0 $HOSTS
    python module_level.py --job_name=worker --task_index=0 $HOSTS
    python module_level.py --job_name=worker --task_index=1 $HOSTS

On TF 2 it runs after `tf_upgrade_v2` and `easgd-migrate` with no hand edits (README.md
beside this file; tests/e2e/test_legacy_corpus.py does that).
"""

from __future__ import absolute_import, division, print_function

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

tf.app.flags.DEFINE_string("job_name", "", "Either 'ps' or 'worker'.")
tf.app.flags.DEFINE_integer("task_index", 0, "Index of this task within its job.")
tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated ps host:port.")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "Worker host:port.")
tf.app.flags.DEFINE_integer("train_steps", 600, "Local training steps of each worker.")
tf.app.flags.DEFINE_float("learning_rate", 0.5, "Learning rate of the SGD steps.")
tf.app.flags.DEFINE_string("checkpoint_dir", "/tmp/easgd_module_level", "The chief's checkpoints.")
FLAGS = tf.app.flags.FLAGS

BATCH_SIZE = 32
PERIOD = 8  # Local steps between two elastic exchanges.
NUM_TRAIN = 1500

# The data: the first 1500 digits train, the other 297 test.
digits = load_digits()
images = (digits.data / 16.0).astype(np.float32)
labels = digits.target.astype(np.int64)

ps_hosts = FLAGS.ps_hosts.split(",")
worker_hosts = FLAGS.worker_hosts.split(",")
cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)

if FLAGS.job_name == "ps":
    server.join()

is_chief = FLAGS.task_index == 0
worker_device = "/job:worker/task:%d" % FLAGS.task_index
ea_getter = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)

with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
    # Queues: one example at a time, shuffled into batches by background threads.
    image, label = tf.train.slice_input_producer(
        [images[:NUM_TRAIN], labels[:NUM_TRAIN]], shuffle=True, seed=FLAGS.task_index
    )
    image_batch, label_batch = tf.train.shuffle_batch(
        [image, label], batch_size=BATCH_SIZE, capacity=500, min_after_dequeue=200
    )
    test_images = tf.constant(images[NUM_TRAIN:])

    with tf.variable_scope("mlp", custom_getter=ea_getter):
        w1 = tf.get_variable("w1", [64, 64], initializer=tf.glorot_uniform_initializer())
        b1 = tf.get_variable("b1", [64], initializer=tf.zeros_initializer())
        w2 = tf.get_variable("w2", [64, 10], initializer=tf.glorot_uniform_initializer())
        b2 = tf.get_variable("b2", [10], initializer=tf.zeros_initializer())

    logits = tf.matmul(tf.nn.tanh(tf.matmul(image_batch, w1) + b1), w2) + b2
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label_batch, logits=logits)
    )
    test_logits = tf.matmul(tf.nn.tanh(tf.matmul(test_images, w1) + b1), w2) + b2
    test_predictions = tf.argmax(test_logits, 1)

    global_step = tf.train.get_or_create_global_step()
    optimizer = tf.contrib.opt.ElasticAverageOptimizer(
        opt=tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
        num_worker=len(worker_hosts),
        ea_custom_getter=ea_getter,
        communication_period=PERIOD,
    )
    train_op = optimizer.minimize(loss, global_step=global_step)
    easgd_hook = optimizer.make_session_run_hook(is_chief, FLAGS.task_index)

config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
step = 0
with tf.train.MonitoredTrainingSession(
    master=server.target,
    is_chief=is_chief,
    checkpoint_dir=FLAGS.checkpoint_dir,
    hooks=[easgd_hook],
    config=config,
) as sess:
    print("Worker %d: session ready" % FLAGS.task_index, flush=True)
    while step < FLAGS.train_steps and not sess.should_stop():
        _, loss_value = sess.run([train_op, loss])
        step += 1
        if step % 200 == 0:
            print("Worker %d: step %d, loss %.4f" % (FLAGS.task_index, step, loss_value))
    predicted = sess.run(test_predictions)

accuracy = np.mean(predicted == labels[NUM_TRAIN:])
print(
    "Worker %d: test accuracy %.4f after %d steps" % (FLAGS.task_index, accuracy, step),
    flush=True,
)
