"""Time to accuracy: train on the embedded digits dataset and time the shared model's accuracy.

Runs inside a benchmark worker process (`task.py`). Worker 0 evaluates the shared model
(the EASGD centre, the ps variables of async SGD, or its own variables when alone) on the
test split every `eval_every` seconds of wall time, in the same thread as its training, so
every configuration pays the same evaluation cost.
"""

import time

import tensorflow as tf

from benchmarks import graphs, models
from tf_contrib_easgd.trainer import data

SPEC = models.DIGITS_MLP


def build(worker, config, num_workers, learning_rate, container):
    """Builds `config` on the digits model for `worker`, with a test-accuracy op.

    Returns:
        (the `graphs.Built`, the accuracy tensor).
    """
    dataset = data.load_digits()
    train_images = dataset.x_train.reshape(len(dataset.x_train), -1)
    test_images = dataset.x_test.reshape(len(dataset.x_test), -1)

    def inputs():
        images = tf.constant(train_images)
        labels = tf.constant(dataset.y_train)
        index = tf.random.uniform(
            [SPEC.batch_size], 0, len(train_images), dtype=tf.int32, seed=worker.index + 1
        )
        return tf.gather(images, index), tf.gather(labels, index)

    built = graphs.build(
        config,
        SPEC,
        worker.cluster_spec,
        worker.index,
        num_workers,
        learning_rate,
        inputs,
        container=container,
    )
    device = f"/job:worker/task:{worker.index}"
    with built.graph.as_default(), tf.compat.v1.device(device):
        predictions = tf.argmax(
            models.logits(SPEC, built.shared_params, tf.constant(test_images)), axis=1
        )
        correct = tf.equal(predictions, tf.constant(dataset.y_test))
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    return built, accuracy


def train(session, train_op, accuracy, start_at, seconds, eval_every, step_options=None):
    """Trains from wall time `start_at` for `seconds`; evaluates when `accuracy` is given.

    `step_options(end)`, if given, makes the RunOptions of a step in a window ending at wall
    time `end`; a step that then exceeds its deadline after `end` ends the training (a
    step of `sync` waits for the other workers, which may have stopped).

    Returns:
        A dict with the local steps taken and, when evaluating, the curve: a list of
        (seconds since start, test accuracy, local steps so far).
    """
    while time.time() < start_at:
        time.sleep(min(0.01, max(start_at - time.time(), 0)))
    steps, curve, next_eval = 0, [], start_at
    end = start_at + seconds
    while True:
        now = time.time()
        if accuracy is not None and now >= next_eval:
            curve.append((now - start_at, float(session.run(accuracy)), steps))
            next_eval += eval_every
        if now >= end:
            break
        try:
            session.run(train_op, options=step_options(end) if step_options else None)
        except tf.errors.DeadlineExceededError:
            if time.time() < end:
                raise
            break
        steps += 1
    return {"steps": steps, "curve": curve}
