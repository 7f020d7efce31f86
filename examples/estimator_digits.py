"""EASGD with tf.estimator: scikit-learn's 8x8 digits, locally or as a TF_CONFIG cluster.

Needs TensorFlow 2.15 and tensorflow-estimator 2.15 (`pip install -e '.[estimator]'`); later
TensorFlow has no tf.estimator.

Without TF_CONFIG it trains one worker in this process, then evaluates the centre:

    python examples/estimator_digits.py --model_dir=/tmp/easgd_estimator

With TF_CONFIG every process runs its task of `tf.estimator.train_and_evaluate`: a chief
and workers train, ps tasks hold the centre, an evaluator evaluates each new checkpoint
(the centre, restored into the plain model) and exits after the last one:

    CLUSTER='"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"],
                         "ps": ["localhost:2224"]}'
    TF_CONFIG="{$CLUSTER, \\"task\\": {\\"type\\": \\"ps\\", \\"index\\": 0}}" \\
        python examples/estimator_digits.py --model_dir=/shared/run1 &
    # ... the same with "chief" 0, "worker" 0 and "evaluator" 0 (the evaluator is
    # not listed in the cluster). The ps runs until it is stopped.

Each training task prints `<task> ran N local steps`, the evaluator (or the local run)
prints `<task> evaluated: accuracy=... global_step=...`. tests/unit/test_estimator.py runs both.
"""

import time
import zlib

import tensorflow as tf
from absl import app, flags

from tf_contrib_easgd.estimator import (
    ElasticAverageEstimatorHelper,
    count_workers,
    exchanges_for,
    session_config,
)
from tf_contrib_easgd.trainer import data

flags.DEFINE_string("model_dir", None, "Checkpoint directory, shared by all tasks.")
flags.DEFINE_integer("local_steps", 300, "Local steps per worker; sets TrainSpec.max_steps.")
flags.DEFINE_integer("communication_period", 4, "Local steps between two exchanges (tau).")
flags.DEFINE_float("learning_rate", 0.2, "Learning rate of plain SGD.")
flags.DEFINE_integer("batch_size", 32, "Training examples per local step.")
flags.DEFINE_integer("throttle_secs", 2, "The evaluator evaluates at most this often.")
flags.DEFINE_integer(
    "chief_wait_secs",
    120,
    "A non-chief worker waits at most this long for the chief's first checkpoint before it "
    "creates its session (0: not at all).",
)
flags.mark_flag_as_required("model_dir")
FLAGS = flags.FLAGS

NUM_CLASSES = 10
HIDDEN_UNITS = 64


def model_fn(features, labels, mode, params, config):
    """A one-hidden-layer MLP trained with EASGD; EVAL and PREDICT use the plain model."""
    easgd = ElasticAverageEstimatorHelper(
        mode, config, communication_period=params["communication_period"]
    )
    with easgd.variable_scope():
        hidden = tf.compat.v1.layers.dense(
            features["pixels"], HIDDEN_UNITS, activation=tf.nn.relu, name="hidden"
        )
        logits = tf.compat.v1.layers.dense(hidden, NUM_CLASSES, name="logits")
    predictions = {"class": tf.argmax(logits, 1), "probabilities": tf.nn.softmax(logits)}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return easgd.estimator_spec(predictions=predictions)

    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        opt = easgd.optimizer(tf.compat.v1.train.GradientDescentOptimizer(params["learning_rate"]))
        train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    accuracy = tf.compat.v1.metrics.accuracy(labels, predictions["class"])
    return easgd.estimator_spec(
        loss=loss, train_op=train_op, eval_metric_ops={"accuracy": accuracy}
    )


def input_fn(images, labels, batch_size, seed=None):
    """Returns an input_fn: shuffled batches forever (training) or one pass (seed=None)."""

    def make_dataset():
        pixels = images.reshape(len(images), -1)
        dataset = tf.data.Dataset.from_tensor_slices(({"pixels": pixels}, labels))
        if seed is None:
            return dataset.batch(batch_size)
        return dataset.shuffle(len(images), seed=seed).repeat().batch(batch_size)

    return make_dataset


class _CountLocalSteps(tf.compat.v1.train.SessionRunHook):
    """Counts the training steps of this task (for the report line)."""

    def __init__(self):
        self.steps = 0

    def after_run(self, run_context, run_values):
        del run_context, run_values  # Unused.
        self.steps += 1


def _wait_for_chief(model_dir, timeout_secs):
    """Waits until the chief has written its first checkpoint, i.e. initialised the model.

    A non-chief worker whose session finds the model uninitialised checks again only 30 s
    later (tf.compat.v1.train.SessionManager); waiting here saves that half minute.
    """
    deadline = time.monotonic() + timeout_secs
    while time.monotonic() < deadline and not tf.train.latest_checkpoint(model_dir):
        time.sleep(0.2)


def main(argv):
    del argv  # Unused.
    digits = data.load_digits()
    config = tf.estimator.RunConfig(
        model_dir=FLAGS.model_dir,
        save_checkpoints_steps=None,
        save_checkpoints_secs=30,
        log_step_count_steps=None,
        save_summary_steps=None,
        experimental_max_worker_delay_secs=0,  # Workers start at once, not 5 s * index.
        session_config=session_config(),  # Direct exchanges; the Estimator's default filters.
    )
    task = f"{config.task_type} {config.task_id}"
    estimator = tf.estimator.Estimator(
        model_fn,
        config=config,
        params={
            "communication_period": FLAGS.communication_period,
            "learning_rate": FLAGS.learning_rate,
        },
    )
    # global_step counts exchanges summed over the workers: this is every worker taking
    # --local_steps steps (see docs/ESTIMATOR.md). Every task needs the same max_steps; the
    # evaluator learns it from TF_CONFIG, its RunConfig knows no workers.
    max_steps = exchanges_for(FLAGS.local_steps, count_workers(), FLAGS.communication_period)
    counter = _CountLocalSteps()
    seed = zlib.crc32(task.encode())  # Each task shuffles the training set its own way.
    train_spec = tf.estimator.TrainSpec(
        input_fn(digits.x_train, digits.y_train, FLAGS.batch_size, seed=seed),
        max_steps=max_steps,
        hooks=[counter],
    )
    eval_input_fn = input_fn(digits.x_test, digits.y_test, batch_size=len(digits.x_test))
    eval_spec = tf.estimator.EvalSpec(
        eval_input_fn,
        steps=None,
        start_delay_secs=0,
        throttle_secs=FLAGS.throttle_secs,
    )
    if config.task_type == "worker" and not config.is_chief and FLAGS.chief_wait_secs > 0:
        _wait_for_chief(FLAGS.model_dir, FLAGS.chief_wait_secs)
    # Returns (metrics, exports) when it runs locally, None in a cluster (the ps never returns).
    metrics, _ = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec) or (None, None)
    if config.task_type == "evaluator":
        metrics = estimator.evaluate(eval_input_fn)  # The last checkpoint: the final centre.
    if config.task_type in ("chief", "worker"):
        print(f"{task} ran {counter.steps} local steps", flush=True)
    if metrics:
        print(
            f"{task} evaluated: accuracy={metrics['accuracy']:.4f} "
            f"global_step={metrics['global_step']}",
            flush=True,
        )


if __name__ == "__main__":
    app.run(main)
