"""Elastic Averaging SGD with Keras model.fit: scikit-learn's 8x8 digits, a ps and workers.

Each worker process runs its own `model.fit` with `ElasticAverageCallback`; the centre
lives on the parameter servers. One ps and two workers on this machine:

    python examples/keras_digits.py --job_name=ps --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224
    python examples/keras_digits.py --job_name=worker --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 \\
        --model_dir=/tmp/easgd_keras
    python examples/keras_digits.py --job_name=worker --task_index=1 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224

Without --job_name the task comes from TF_CONFIG (Kubernetes' training operator). Worker 0,
the chief, sets up the centre, waits for the others at the end and writes the centre to
--model_dir as centre.keras; the ps exits then. Each worker prints the test accuracy of
the centre, which its model holds after fit. With TF_USE_LEGACY_KERAS=1 set in the
environment, tf.keras is tf-keras (Keras 2) instead of Keras 3. docs/KERAS.md walks
through it; tests/e2e/test_keras_fit.py runs it.
"""

import argparse

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tf_contrib_easgd
from tf_contrib_easgd.keras import ElasticAverageCallback


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job_name", choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--ps_hosts")
    parser.add_argument("--worker_hosts")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--model_dir", help="Where the chief writes the centre.")
    return parser.parse_args()


def main():
    args = parse_args()
    if args.job_name:
        task = tf_contrib_easgd.cluster_from_hosts(
            args.job_name, args.task_index, args.ps_hosts, args.worker_hosts
        )
    else:
        task = tf_contrib_easgd.cluster_from_tf_config()
    if task.is_ps:
        server = tf.distribute.Server(
            task.cluster_spec(), job_name="ps", task_index=task.task_index
        )
        tf_contrib_easgd.serve_until_done(server)  # Until the chief ends the job.
        return

    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    train, test = slice(0, 1500), slice(1500, None)
    # Each worker trains on its own shard of the training digits.
    x = images[train][task.task_index :: task.num_workers]
    y = digits.target[train][task.task_index :: task.num_workers]

    model = tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(10),
        ],
        name="mlp",
    )
    model.compile(
        optimizer=tf.keras.optimizers.SGD(0.05, momentum=0.9),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    easgd = ElasticAverageCallback(task, communication_period=10, model_dir=args.model_dir)
    model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=2, callbacks=[easgd])
    # After fit the model holds the centre.
    _, accuracy = model.evaluate(images[test], digits.target[test], verbose=0)
    print(
        f"Worker {task.task_index}: centre test accuracy {accuracy:.4f} after "
        f"{easgd.local_steps} local steps, {easgd.global_step} exchanges in all",
        flush=True,
    )


if __name__ == "__main__":
    main()
