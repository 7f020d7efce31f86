# ruff: noqa: F403, F405, SIM117, UP010, UP031 -- 2018 style: a star import, nested with.
"""EASGD on a slim network, trained by `slim.learning.train`, as a multi-module TF1 project.

Left in TensorFlow 1.x form on purpose: tensorflow/models' research/slim style, split
across modules as projects were. `tf` and `slim` come from `from common import *`; the
input helper (`digits_input.py`) builds a queue pipeline with image summaries; the network
(`nets/digits_net.py`) is slim layers with an L2 regularizer. `slim.learning.train` runs a
`tf.train.Supervisor`, which runs no session hooks, so the script starts each worker from
the centre with its own `local_init_op`, as contrib asked of scripts without the hook, and
saves the centre under the model's names with the swapping saver. The run stops at
`--max_number_of_steps` global steps and the learning rate decays on the global step: both
count exchanges under EASGD. The chief then evaluates the saved centre on the test digits.

    HOSTS="--ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224"
    python train.py --job_name=ps --task_index=0 $HOSTS
    python train.py --job_name=worker --task_index=0 $HOSTS
    python train.py --job_name=worker --task_index=1 $HOSTS

On TF 2, `tf_upgrade_v2 --intree` and `easgd-migrate` on the whole folder make it run with
no hand edits (README.md beside this folder; tests/e2e/test_legacy_corpus.py does that).
"""

from __future__ import absolute_import, division, print_function

import digits_input
from common import *
from nets import digits_net


def evaluate(images, labels):
    """Test accuracy of the latest checkpoint of --train_dir (the centre, plain names)."""
    with tf.Graph().as_default():
        test_images = digits_input.resize(tf.constant(images), IMAGE_SIZE)
        with slim.arg_scope(digits_net.digits_net_arg_scope()):
            logits = digits_net.digits_net(test_images)
        correct = tf.equal(tf.argmax(logits, 1), tf.constant(labels))
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        saver = tf.train.Saver(slim.get_model_variables())
        with tf.Session() as sess:
            saver.restore(sess, tf.train.latest_checkpoint(FLAGS.train_dir))
            return sess.run(accuracy)


def main(unused_argv):
    ps_spec = FLAGS.ps_hosts.split(",")
    worker_spec = FLAGS.worker_hosts.split(",")
    num_workers = len(worker_spec)
    cluster = tf.train.ClusterSpec({"ps": ps_spec, "worker": worker_spec})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()

    images, labels = digits()
    is_chief = FLAGS.task_index == 0
    worker_device = "/job:worker/task:%d" % FLAGS.task_index
    ea_getter = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)
    with tf.device(tf.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        image_batch, label_batch = digits_input.inputs(
            images[:NUM_TRAIN],
            labels[:NUM_TRAIN],
            FLAGS.batch_size,
            IMAGE_SIZE,
            seed=FLAGS.task_index,
        )
        with tf.variable_scope("", custom_getter=ea_getter):
            with slim.arg_scope(digits_net.digits_net_arg_scope()):
                logits = digits_net.digits_net(image_batch)
        tf.losses.sparse_softmax_cross_entropy(labels=label_batch, logits=logits)
        total_loss = tf.losses.get_total_loss()
        tf.summary.scalar("total_loss", total_loss)

        learning_rate = tf.train.exponential_decay(
            FLAGS.learning_rate, global_step, FLAGS.decay_steps, 0.5, staircase=True
        )
        opt = tf.contrib.opt.ElasticAverageOptimizer(
            opt=tf.train.GradientDescentOptimizer(learning_rate),
            num_worker=num_workers,
            ea_custom_getter=ea_getter,
            communication_period=FLAGS.communication_period,
        )
        train_op = slim.learning.create_train_op(total_loss, opt, global_step=global_step)
        # The Supervisor runs no hooks: start from the centre once the locals exist.
        with tf.control_dependencies([tf.local_variables_initializer()]):
            local_init_op = opt.get_init_op(FLAGS.task_index)
        saver = opt.swapping_saver()

    local_steps = [0]

    def train_step_fn(sess, op, step, train_step_kwargs):
        if local_steps[0] == 0:
            print("Worker %d: session ready" % FLAGS.task_index, flush=True)
        local_steps[0] += 1
        return slim.learning.train_step(sess, op, step, train_step_kwargs)

    config = tf.ConfigProto(device_filters=["/job:ps", worker_device])
    final_loss = slim.learning.train(
        train_op,
        FLAGS.train_dir,
        train_step_fn=train_step_fn,
        master=server.target,
        is_chief=is_chief,
        number_of_steps=FLAGS.max_number_of_steps,
        local_init_op=local_init_op,
        saver=saver,
        session_config=config,
        log_every_n_steps=100,
    )
    print(
        "Worker %d: %d local steps, final loss %.4f"
        % (FLAGS.task_index, local_steps[0], final_loss),
        flush=True,
    )
    if is_chief:
        accuracy = evaluate(images[NUM_TRAIN:], labels[NUM_TRAIN:])
        print("Worker 0: test accuracy %.4f of the centre" % accuracy, flush=True)


if __name__ == "__main__":
    tf.app.run()
