"""Elastic Averaging SGD in a TF 2 custom training loop: the digits MLP of easgd-train, Adam.

Each worker process trains its own copy of the model in a `tf.function` train step
(`tf.GradientTape`, Adam) and calls `ElasticAverageWorker.step()` after each step; the
centre lives on the parameter servers. One ps and two workers on this machine:

    python examples/custom_loop_digits.py --job_name=ps --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224
    python examples/custom_loop_digits.py --job_name=worker --task_index=0 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224 \\
        --model_dir=/tmp/easgd_loop
    python examples/custom_loop_digits.py --job_name=worker --task_index=1 \\
        --ps_hosts=localhost:2222 --worker_hosts=localhost:2223,localhost:2224

Without --job_name the task comes from TF_CONFIG. Worker 0, the chief, sets up the centre,
waits for the others at the end and writes the centre to --model_dir as a
tf.train.Checkpoint (`centre`) that plain TF 2 reads; the ps exits then. Each worker
prints the test accuracy of the centre, which its model holds after the loop. The data
and the model are easgd-train's (--model=mlp): every fifth digit of each class is a test
digit, one hidden layer of 128. docs/KERAS.md walks through it; tests/e2e/test_custom_loop.py
runs it.
"""

import argparse

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tf_contrib_easgd


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job_name", choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, default=0)
    parser.add_argument("--ps_hosts")
    parser.add_argument("--worker_hosts")
    parser.add_argument("--steps", type=int, default=1000, help="Local steps of each worker.")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=0.002)
    parser.add_argument("--communication_period", type=int, default=10)
    parser.add_argument("--log_every_steps", type=int, default=100)
    parser.add_argument("--timeout_secs", type=float, default=600.0)
    parser.add_argument("--model_dir", help="Where the chief writes the centre.")
    return parser.parse_args()


def digits_split():
    """easgd-train's split: of each class, every fifth digit in file order is a test digit."""
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    is_test = np.zeros(len(labels), bool)
    for label in range(10):
        is_test[np.flatnonzero(labels == label)[4::5]] = True
    return (images[~is_test], labels[~is_test]), (images[is_test], labels[is_test])


def build_model(seed=0):
    """easgd-train's MLP: 64 pixels, 128 ReLU units (He normal), 10 logits (Glorot)."""
    return tf.keras.Sequential(
        [
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(
                128, "relu", kernel_initializer=tf.keras.initializers.HeNormal(seed)
            ),
            tf.keras.layers.Dense(10, kernel_initializer=tf.keras.initializers.GlorotUniform(seed)),
        ],
        name="mlp",
    )


def accuracy(model, images, labels):
    return float(np.mean(np.argmax(model(images).numpy(), axis=1) == labels))


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

    (x_train, y_train), (x_test, y_test) = digits_split()
    # Each worker trains on its own shard of the training digits.
    shard = slice(task.task_index, None, task.num_workers)
    batches = (
        tf.data.Dataset.from_tensor_slices((x_train[shard], y_train[shard]))
        .shuffle(1000, seed=task.task_index)
        .repeat()
        .batch(args.batch_size)
        .take(args.steps)
    )
    model = build_model()
    optimizer = tf.keras.optimizers.Adam(args.learning_rate)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    worker = tf_contrib_easgd.ElasticAverageWorker(
        task,
        model,  # Every float variable of the model; the optimizer's state stays local.
        communication_period=args.communication_period,
        moving_rate=0.9 / task.num_workers,  # The paper's, easgd-train's default.
        model_dir=args.model_dir,
        timeout_secs=args.timeout_secs,
    )
    with worker:  # Starts from the centre; at the end, ends the job in order.
        print(
            f"Worker {task.task_index}: started from the centre ({worker.centre_found}), "
            f"{worker.global_step} exchanges so far, distance {worker.elastic_distance():.6f}",
            flush=True,
        )
        for step, (images, labels) in enumerate(batches, 1):
            loss = train_step(images, labels)
            worker.step()
            if step % args.log_every_steps == 0:
                print(
                    f"Worker {task.task_index}: step {step}, loss {float(loss):.4f}, "
                    f"{worker.global_step} exchanges",
                    flush=True,
                )
    if worker.finished is not None:  # The chief: what the others reported at their end.
        print(
            f"Worker 0: the others' local steps {worker.finished.local_steps}, "
            f"missing {worker.finished.missing}",
            flush=True,
        )
    # After the loop the model holds the centre.
    print(
        f"Worker {task.task_index}: centre test accuracy "
        f"{accuracy(model, x_test, y_test):.4f} after {worker.local_steps} local steps, "
        f"{worker.global_step} exchanges in all",
        flush=True,
    )


if __name__ == "__main__":
    main()
