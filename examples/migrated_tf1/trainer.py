# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""The TF1 trainer of examples/legacy_tf1/trainer.py, migrated, with the job's end in order.

This is `examples/legacy_tf1/trainer.py` after

    tf_upgrade_v2 --infile trainer.py --outfile trainer.py
    easgd-migrate trainer.py

and the edits marked "Added" or "Changed" below, that give a script of one's own what
`easgd-train` does: a `WorkLedger` keeps each worker's count of local steps with the
centre (a session goes on from its count, and a parameter server restored from a checkpoint
sends a worker back to it), the chief waits for every count before its final checkpoint,
the parameter server stops when the job is done, and the elastic distance goes to
TensorBoard.
(easgd-migrate made the session `tf_contrib_easgd.MonitoredTrainingSession`: a non-chief
starts as soon as the centre is ready, not up to 30 s later, and the chief keeps a centre
the ps holds.)
tests/e2e/test_migrated_example.py checks that the difference is those edits and runs the job.

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python trainer.py --job_name=ps --task_index=0 $HOSTS &
    python trainer.py --job_name=worker --task_index=0 $HOSTS --checkpoint_dir=/tmp/run1 &
    python trainer.py --job_name=worker --task_index=1 $HOSTS --checkpoint_dir=/tmp/run1
"""

from __future__ import absolute_import, division, print_function

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tf_contrib_easgd

tf.compat.v1.disable_v2_behavior()

flags = tf.compat.v1.app.flags
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
    with tf.compat.v1.variable_scope("mlp"):
        w1 = tf.compat.v1.get_variable(
            "w1",
            [64, HIDDEN_UNITS],
            initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.1),
        )
        b1 = tf.compat.v1.get_variable(
            "b1", [HIDDEN_UNITS], initializer=tf.compat.v1.zeros_initializer()
        )
        hidden = tf.nn.relu(tf.matmul(images, w1) + b1)
        w2 = tf.compat.v1.get_variable(
            "w2",
            [HIDDEN_UNITS, 10],
            initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.1),
        )
        b2 = tf.compat.v1.get_variable("b2", [10], initializer=tf.compat.v1.zeros_initializer())
        return tf.matmul(hidden, w2) + b2


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.distribute.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        tf_contrib_easgd.serve_until_done(server)  # Changed: server.join() never returns.
        return

    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index
    (train_images, train_labels), (test_images, test_labels) = load_data()

    # Each worker trains its own copy of the variables; the centre lives on the ps.
    ea_custom = tf_contrib_easgd.ElasticAverageCustomGetter(worker_device=worker_device)
    device_setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker_device, cluster=cluster
    )
    with (
        tf.compat.v1.device(device_setter),
        tf.compat.v1.variable_scope("", custom_getter=ea_custom),
    ):
        images = tf.compat.v1.placeholder(tf.float32, [None, 64], name="images")
        labels = tf.compat.v1.placeholder(tf.int64, [None], name="labels")
        logits = inference(images)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        )
        correct = tf.equal(tf.argmax(logits, 1), labels)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = tf_contrib_easgd.ElasticAverageOptimizer(
            opt=tf.compat.v1.train.GradientDescentOptimizer(FLAGS.learning_rate),
            num_worker=len(worker_hosts),
            ea_custom_getter=ea_custom,
            communication_period=FLAGS.communication_period,
        )
        train_op = opt.minimize(loss, global_step=global_step)
        # Added: how far this worker is from the centre, in the chief's summaries.
        tf.compat.v1.summary.scalar("elastic_distance", ea_custom.elastic_distance())
    # Added: each worker's count of local steps, on the ps with the centre and saved with
    # it, and the end of the job once every count is complete.
    ledger = tf_contrib_easgd.WorkLedger(
        cluster, is_chief, FLAGS.task_index, FLAGS.train_steps, FLAGS.communication_period
    )

    easgd_hook = opt.make_session_run_hook(is_chief, FLAGS.task_index)
    # The centre is saved under the variables' own names, for a plain model to restore.
    scaffold = tf.compat.v1.train.Scaffold(saver=opt.swapping_saver())
    # Talk to the ps and to this worker only, so that no worker waits for the others.
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", worker_device])
    rng = np.random.RandomState(FLAGS.task_index)
    # easgd-migrate wrote tf_contrib_easgd's: a non-chief starts as soon as the centre is
    # ready; the chief keeps a centre the ps holds.
    with tf_contrib_easgd.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.checkpoint_dir,
        scaffold=scaffold,
        hooks=[easgd_hook, ledger.hook],  # Changed: the ledger's hook reads the count.
        config=config,
    ) as sess:
        print("Worker %d: session ready" % FLAGS.task_index, flush=True)
        step = ledger.step  # Changed: 0, or the count of a restarted worker.
        # Changed: once this worker has its steps, finish() ends the job (the chief waits
        # for every other count, so that the checkpoint it writes when the session closes
        # holds their work), or finds a lower count (a restored ps): train again.
        while not sess.should_stop() and not ledger.finish(sess):
            batch = rng.randint(0, len(train_images), FLAGS.batch_size)
            _, loss_value = sess.run(
                [train_op, loss],
                feed_dict={images: train_images[batch], labels: train_labels[batch]},
            )
            step = ledger.count(sess)  # Changed: counts, and writes after each exchange.
            if step % 200 == 0:
                tf.compat.v1.logging.info(
                    "Worker %d: step %d, loss %.4f", FLAGS.task_index, step, loss_value
                )
        test_accuracy = sess.run(accuracy, feed_dict={images: test_images, labels: test_labels})
        message = "Worker %d: test accuracy %.4f after %d steps"
        print(message % (FLAGS.task_index, test_accuracy, step), flush=True)
    ledger.stop_parameter_servers(server.target)  # Added: the chief stops the ps.


if __name__ == "__main__":
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    tf.compat.v1.app.run()
