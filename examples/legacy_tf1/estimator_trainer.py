# ruff: noqa: UP010, UP031 -- 2018 style on purpose: __future__ imports, %-formatting.
"""EASGD in a tf.estimator model_fn, as a 2018 Kubeflow TFJob script was written.

Left in TensorFlow 1.x form on purpose. The TFJob operator (or the user) sets `TF_CONFIG`
for each task; every task runs this same script:

* the input functions are `tf.estimator.inputs.numpy_input_fn`;
* `model_fn` wraps the model in contrib's EASGD getter in TRAIN mode only, and hands the
  optimizer's hook to the Estimator as a training hook, with the swapping saver in the
  `Scaffold` (so the checkpoints hold the centre under the plain names the EVAL graph has,
  and the global step);
* `tf.estimator.train_and_evaluate` trains (the chief, the workers) or serves (the ps);
* the chief evaluates the last checkpoint and exports the model with `export_savedmodel`.

It learns scikit-learn's 8x8 digits with a one-hidden-layer perceptron. One ps, the chief
and one worker (the evaluator task is left out):

    CLUSTER='"cluster": {"chief": ["localhost:2222"], "worker": ["localhost:2223"],
                         "ps": ["localhost:2224"]}'
    TF_CONFIG="{$CLUSTER, \\"task\\": {\\"type\\": \\"ps\\", \\"index\\": 0}}" \\
        python estimator_trainer.py --model_dir=/shared/run1
    # ... and the same with "chief" 0 and "worker" 0.

tf.estimator needs TensorFlow 2.15 on TF 2 (later TensorFlow has none); there it runs after
`tf_upgrade_v2` and `easgd-migrate` with no hand edits (README.md beside this file;
tests/e2e/test_legacy_corpus.py does that).
"""

from __future__ import absolute_import, division, print_function

import argparse
import os

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

NUM_TRAIN = 1500
HIDDEN_UNITS = 64
COMMUNICATION_PERIOD = 4


def model_fn(features, labels, mode, params, config):
    """An MLP; in TRAIN mode its variables go through the EASGD getter."""
    getter = None
    if mode == tf.estimator.ModeKeys.TRAIN:
        worker_device = "/job:%s/task:%d" % (config.task_type, config.task_id)
        getter = tf.contrib.opt.ElasticAverageCustomGetter(worker_device=worker_device)
    with tf.variable_scope("mlp", custom_getter=getter):
        hidden = tf.layers.dense(features["pixels"], HIDDEN_UNITS, tf.nn.tanh, name="hidden")
        logits = tf.layers.dense(hidden, 10, name="logits")
    predictions = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": predictions})

    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = tf.metrics.accuracy(labels, predictions)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"accuracy": accuracy})

    # The chief is EASGD worker 0, TF_CONFIG's worker i is worker i + 1.
    task_index = config.task_id + 1 if config.task_type == "worker" else 0
    optimizer = tf.contrib.opt.ElasticAverageOptimizer(
        opt=tf.train.GradientDescentOptimizer(params["learning_rate"]),
        num_worker=config.num_worker_replicas,
        ea_custom_getter=getter,
        communication_period=COMMUNICATION_PERIOD,
    )
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    # The centre under the model's own names, and the global step, which the EVAL graph's
    # default saver restores too (contrib's swapping saver keeps only the listed variables).
    saved = tf.trainable_variables() + [tf.train.get_global_step()]
    return tf.estimator.EstimatorSpec(
        mode,
        loss=loss,
        train_op=train_op,
        training_hooks=[optimizer.make_session_run_hook(config.is_chief, task_index)],
        scaffold=tf.train.Scaffold(saver=optimizer.swapping_saver(var_list=saved)),
    )


def serving_input_receiver_fn():
    pixels = tf.placeholder(tf.float32, [None, 64], name="pixels")
    return tf.estimator.export.ServingInputReceiver({"pixels": pixels}, {"pixels": pixels})


def main(args):
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)

    config = tf.estimator.RunConfig(model_dir=args.model_dir, save_checkpoints_secs=30)
    estimator = tf.estimator.Estimator(
        model_fn, config=config, params={"learning_rate": args.learning_rate}
    )
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        {"pixels": images[:NUM_TRAIN]},
        labels[:NUM_TRAIN],
        batch_size=32,
        num_epochs=None,
        shuffle=True,
    )
    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        {"pixels": images[NUM_TRAIN:]}, labels[NUM_TRAIN:], num_epochs=1, shuffle=False
    )
    # global_step counts EASGD's exchanges, summed over the trainers.
    train_spec = tf.estimator.TrainSpec(train_input_fn, max_steps=args.max_exchanges)
    eval_spec = tf.estimator.EvalSpec(eval_input_fn, steps=None)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)

    if config.is_chief:
        metrics = estimator.evaluate(eval_input_fn)
        print(
            "Chief: test accuracy %.4f at global step %d"
            % (metrics["accuracy"], metrics["global_step"]),
            flush=True,
        )
        estimator.export_savedmodel(
            os.path.join(args.model_dir, "export"), serving_input_receiver_fn
        )
    else:
        print("%s %d: done" % (config.task_type, config.task_id), flush=True)


if __name__ == "__main__":
    tf.logging.set_verbosity(tf.logging.INFO)
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_dir", default="/tmp/easgd_estimator")
    parser.add_argument("--max_exchanges", type=int, default=500)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    main(parser.parse_args())
