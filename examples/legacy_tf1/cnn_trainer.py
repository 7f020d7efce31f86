# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""A tf.layers CNN trained with contrib's Elastic Averaging SGD, in 2018 TF1 style.

Left in TensorFlow 1.x form on purpose, like trainer.py beside it, with the idioms that
scripts of that time used most and that TF 2 broke:

* `tf.layers` (conv2d, max_pooling2d, flatten, dense, dropout) and `tf.losses`;
* a `tf.data` input pipeline with a one-shot iterator;
* the global step as a plain `tf.Variable` named "global_step";
* `tf.train.StopAtStepHook` and `tf.summary.scalar` with the summaries that
  `MonitoredTrainingSession` writes itself;
* `tf.train.MomentumOptimizer` wrapped by `tf.contrib.opt.ElasticAverageOptimizer`, its
  elastic penalty switched off (`rho=0.0`).

It learns scikit-learn's 8x8 digits (shipped with scikit-learn, no download). One parameter
server and two workers, started by hand (worker 0, the chief, first):

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python cnn_trainer.py --job_name=ps --task_index=0 $HOSTS
    python cnn_trainer.py --job_name=worker --task_index=0 $HOSTS
    python cnn_trainer.py --job_name=worker --task_index=1 $HOSTS

On TF 2 it runs after `tf_upgrade_v2` and `easgd-migrate` with no hand edits (README.md
beside this file; tests/e2e/test_legacy_corpus.py does that).
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
flags.DEFINE_integer("max_exchanges", 60, "Stop when global_step (exchanges) reaches this.")
flags.DEFINE_integer("batch_size", 32, "Examples per local step.")
flags.DEFINE_float("learning_rate", 0.05, "Learning rate of the momentum steps.")
flags.DEFINE_integer("communication_period", 8, "Local steps between two elastic updates.")
flags.DEFINE_string("train_dir", "/tmp/easgd_cnn", "Checkpoints and summaries of the chief.")
FLAGS = flags.FLAGS

NUM_TRAIN = 1500  # The remaining 297 digits are the test set.


def load_data():
    """Returns ((train_images, train_labels), (test_images, test_labels)); NHWC images."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., np.newaxis]
    labels = digits.target.astype(np.int64)
    return (images[:NUM_TRAIN], labels[:NUM_TRAIN]), (images[NUM_TRAIN:], labels[NUM_TRAIN:])


def cnn(images, training):
    """Two convolutions and a dense layer, all from tf.layers."""
    net = tf.layers.conv2d(images, 16, 3, padding="same", activation=tf.nn.relu, name="conv1")
    net = tf.layers.max_pooling2d(net, 2, 2, name="pool1")
    net = tf.layers.conv2d(net, 32, 3, padding="same", activation=tf.nn.relu, name="conv2")
    net = tf.layers.max_pooling2d(net, 2, 2, name="pool2")
    net = tf.layers.flatten(net)
    net = tf.layers.dense(net, 64, activation=tf.nn.relu, name="fc1")
    net = tf.layers.dropout(net, rate=0.1, training=training)
    return tf.layers.dense(net, 10, name="logits")


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

    ea_getter = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)
    device_setter = tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)
    with tf.device(device_setter):
        with tf.variable_scope("", custom_getter=ea_getter):
            dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
            dataset = dataset.shuffle(NUM_TRAIN, seed=FLAGS.task_index).repeat()
            dataset = dataset.batch(FLAGS.batch_size)
            batch_images, batch_labels = dataset.make_one_shot_iterator().get_next()
            # Training reads batches; evaluation feeds the test set into the same tensors.
            images = tf.placeholder_with_default(batch_images, [None, 8, 8, 1], name="images")
            labels = tf.placeholder_with_default(batch_labels, [None], name="labels")
            training = tf.placeholder_with_default(True, [], name="training")
            logits = cnn(images, training)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        tf.summary.scalar("loss", loss)
        tf.summary.scalar("accuracy", accuracy)

        # Outside the getter's scope: contrib's getter failed on the optimizer's slots.
        global_step = tf.Variable(0, name="global_step", trainable=False)
        opt = tf.contrib.opt.ElasticAverageOptimizer(
            opt=tf.train.MomentumOptimizer(FLAGS.learning_rate, momentum=0.9),
            num_worker=len(worker_hosts),
            ea_custom_getter=ea_getter,
            communication_period=FLAGS.communication_period,
            rho=0.0,
        )
        train_op = opt.minimize(loss, global_step=global_step)

    hooks = [
        opt.make_session_run_hook(is_chief, FLAGS.task_index),
        tf.train.StopAtStepHook(last_step=FLAGS.max_exchanges),
    ]
    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    local_steps = 0
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.train_dir,
        scaffold=tf.train.Scaffold(saver=opt.swapping_saver()),
        hooks=hooks,
        save_summaries_steps=10,
        config=config,
    ) as sess:
        print("Worker %d: session ready" % FLAGS.task_index, flush=True)
        while not sess.should_stop():
            _, loss_value = sess.run([train_op, loss])
            local_steps += 1
            if local_steps % 100 == 0:
                tf.logging.info(
                    "Worker %d: step %d, loss %.4f", FLAGS.task_index, local_steps, loss_value
                )
    # The StopAtStepHook ended the monitored session; its hooks are gone, so read the
    # worker's copy in a plain session of the same graph.
    with tf.Session(server.target, config=config) as sess:
        feed = {images: test_images, labels: test_labels, training: False}
        test_accuracy = sess.run(accuracy, feed_dict=feed)
    message = "Worker %d: test accuracy %.4f after %d steps"
    print(message % (FLAGS.task_index, test_accuracy, local_steps), flush=True)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run()
