"""Contrib's default rho with momentum and Adam, measured on the embedded digits.

    python -m benchmarks.rho_forms                        # the table of docs/MIGRATING.md
    python -m benchmarks.rho_forms --seeds=1 --steps=200  # a smoke run, well under a minute

Trains easgd-train's MLP (tf_contrib_easgd/trainer/models.py) on scikit-learn's 8x8 digits
(tf_contrib_easgd/trainer/data.py) with `ElasticAverageOptimizer` wrapping SGD, Momentum(0.9) or
Adam, each with three elastic pulls between exchanges:

- `gradient, default rho`: contrib's default, rho = moving_rate / learning_rate, its penalty
  in the loss and its gradient through the wrapped optimizer;
- `rho=0`: no pull between exchanges (the paper's asynchronous EASGD);
- `move, default rho`: `penalty="move"`, the pull moving_rate * (x - local centre) applied
  beside the optimizer's step.

One worker trains with all devices local; two workers are `tf.compat.v1.train.Server`s of
this process (a ps and two workers on loopback ports), each with its own graph and session
as in between-graph replication, taking local steps in turn (worker 0, worker 1, ...), so
the schedule is deterministic. Each worker trains on its own shard of the training split
(`Dataset.shard`), batches of 32 in a seeded order; communication_period 10 and the default
moving_rate 0.9 / 10 / workers. Ops run on one intra-op thread. Everything runs in TF1 mode
(`tf.compat.v1.disable_v2_behavior()`, as a migrated script does).

Reported, as the median over the seeds: the centre's mean cross-entropy on the whole
training split and its accuracy on the test split after `--steps` local steps per worker,
and the local steps per worker until the centre first reached `--target` test accuracy
(checked every `--eval_every` local steps; "-" when it did not in the median run). The
Markdown table goes to stdout, progress to stderr.
"""

import os
import platform
import socket
import statistics
import sys
import time
import uuid
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The ps and both workers are servers of this process: they share one inter-op pool, which
# needs more threads than in-process workers (docs/API.md, "A whole cluster in one process").
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "16")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from tf_contrib_easgd import (  # noqa: E402
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
    ElasticPenaltyWarning,
    data,
    models,
)

flags.DEFINE_integer("steps", 1000, "Local steps per worker.")
flags.DEFINE_integer("seeds", 3, "Seeds per configuration (the table shows the median).")
flags.DEFINE_list("workers", ["1", "2"], "Worker counts to measure.")
flags.DEFINE_integer("eval_every", 20, "Local steps between two checks of the target.")
flags.DEFINE_float("target", 0.9, "Test accuracy whose first reach is reported.")
FLAGS = flags.FLAGS

BATCH_SIZE = 32
PERIOD = 10
MODEL = "mlp"

#: Name -> (factory taking the learning rate, learning rate): each rate is the usual one of
#: its optimizer for this model (SGD 0.1; Momentum 0.01, the same long-run step with 0.9).
OPTIMIZERS = {
    "SGD": (tf.compat.v1.train.GradientDescentOptimizer, 0.1),
    "Momentum(0.9)": (lambda rate: tf.compat.v1.train.MomentumOptimizer(rate, 0.9), 0.01),
    "Adam": (tf.compat.v1.train.AdamOptimizer, 0.001),
}
#: Name -> the ElasticAverageOptimizer arguments of the elastic pull.
PULLS = {
    "gradient, default rho (contrib)": {},
    "rho=0": {"rho": 0.0},
    "move, default rho": {"penalty": "move"},
}


def _free_ports(count):
    """`count` distinct TCP ports that were free a moment ago."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("localhost", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class Cluster:
    """One ps and `num_workers` worker servers in this process, for the whole run."""

    def __init__(self, num_workers):
        ports = _free_ports(1 + num_workers)
        self.spec = tf.train.ClusterSpec(
            {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
        )
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1)
        self.servers = [tf.distribute.Server(self.spec, "ps", 0, config=config)] + [
            tf.distribute.Server(self.spec, "worker", i, config=config) for i in range(num_workers)
        ]

    def target(self, index):
        """The session target of worker `index`."""
        return self.servers[1 + index].target


class Worker:
    """One worker's graph and session: training, and (worker 0) evaluating the centre."""

    def __init__(self, index, num_workers, make_opt, pull, seed, cluster, container):
        dataset = data.load_digits()
        self.index = index
        device = f"/job:worker/task:{index}" if cluster else ""
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.compat.v1.container(container):
            tf.compat.v1.set_random_seed(seed)
            getter = ElasticAverageCustomGetter(device)
            setter = (
                tf.compat.v1.train.replica_device_setter(worker_device=device, cluster=cluster.spec)
                if cluster
                else ""
            )
            self.images = tf.compat.v1.placeholder(tf.float32, [None, *dataset.image_shape])
            self.labels = tf.compat.v1.placeholder(tf.int64, [None])
            with (
                tf.compat.v1.device(setter),
                tf.compat.v1.variable_scope("", custom_getter=getter),
            ):
                logits = models.build_model(MODEL, self.images, dataset.num_classes)
                loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(self.labels, logits)
                global_step = tf.compat.v1.train.get_or_create_global_step()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ElasticPenaltyWarning)  # Measured here.
                    opt = ElasticAverageOptimizer(
                        make_opt(), num_workers, getter, communication_period=PERIOD, **pull
                    )
                self.train_op = opt.minimize(loss, global_step=global_step)
            # Run one after the other: the centres, the worker's own, the copy from the centres.
            self.init = [
                *[tf.compat.v1.global_variables_initializer()] * (index == 0),
                tf.compat.v1.local_variables_initializer(),
                opt.get_init_op(index),
            ]
            # The centre, evaluated as the same model whose variables are the global centres.
            centres = {
                v.op.name: getter.find(v).global_center for v in tf.compat.v1.trainable_variables()
            }
            with (
                tf.compat.v1.device(device),
                tf.compat.v1.variable_scope("", custom_getter=lambda name, **_: centres[name]),
            ):
                centre_logits = models.build_model(MODEL, self.images, dataset.num_classes)
            self.centre_loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=self.labels, logits=centre_logits
                )
            )
            self.centre_accuracy = tf.reduce_mean(
                tf.cast(tf.equal(tf.argmax(centre_logits, 1), self.labels), tf.float32)
            )
        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=1,
            device_filters=["/job:ps", device] if cluster else [],
        )
        self.session = tf.compat.v1.Session(
            cluster.target(index) if cluster else "", graph=self.graph, config=config
        )
        images, labels = dataset.shard(index, num_workers)
        self.batches = data.batches(images, labels, BATCH_SIZE, seed=1000 * seed + index)
        self.dataset = dataset

    def step(self):
        """Takes one local step."""
        images, labels = next(self.batches)
        self.session.run(self.train_op, {self.images: images, self.labels: labels})

    def evaluate(self, images, labels):
        """The centre's (mean cross-entropy, accuracy) on `images`."""
        return self.session.run(
            [self.centre_loss, self.centre_accuracy], {self.images: images, self.labels: labels}
        )


def run_once(num_workers, optimizer, pull, seed, cluster):
    """Trains one configuration; returns (train loss, test accuracy, steps to target or None)."""
    factory, rate = OPTIMIZERS[optimizer]
    container = f"rho{uuid.uuid4().hex}"
    workers = [
        Worker(i, num_workers, lambda: factory(rate), PULLS[pull], seed, cluster, container)
        for i in range(num_workers)
    ]
    for worker in workers:  # Worker 0 first: it initialises the centres.
        for op in worker.init:
            worker.session.run(op)
    dataset = workers[0].dataset
    reached = None
    for step in range(1, FLAGS.steps + 1):
        for worker in workers:
            worker.step()
        if reached is None and step % FLAGS.eval_every == 0:
            _, accuracy = workers[0].evaluate(dataset.x_test, dataset.y_test)
            reached = step if accuracy >= FLAGS.target else None
    train_loss, _ = workers[0].evaluate(dataset.x_train, dataset.y_train)
    _, test_accuracy = workers[0].evaluate(dataset.x_test, dataset.y_test)
    for worker in workers:
        worker.session.close()
    if cluster:
        tf.compat.v1.Session.reset(cluster.target(0), [container])
    return float(train_loss), float(test_accuracy), reached


def _median_steps(values):
    """The median of steps-to-target, a run that never got there counting as infinite."""
    median = statistics.median(v if v is not None else float("inf") for v in values)
    return "-" if median == float("inf") else f"{median:g}"


def table(results, worker_counts):
    """The Markdown table of {(workers, optimizer, pull): [(loss, accuracy, steps), ...]}."""
    head = ["optimizer (learning rate)", "pull between exchanges"]
    for count in worker_counts:
        noun = "worker" if count == 1 else "workers"
        head += [
            f"{count} {noun}: train loss",
            "test acc.",
            f"steps to {FLAGS.target:.0%}",
        ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for optimizer, (_, rate) in OPTIMIZERS.items():
        for pull in PULLS:
            cells = [f"{optimizer} ({rate:g})", pull]
            for count in worker_counts:
                runs = results[count, optimizer, pull]
                cells += [
                    f"{statistics.median(r[0] for r in runs):.3f}",
                    f"{statistics.median(r[1] for r in runs):.3f}",
                    _median_steps(r[2] for r in runs),
                ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    del argv
    tf.compat.v1.disable_v2_behavior()
    worker_counts = [int(w) for w in FLAGS.workers]
    start = time.monotonic()
    clusters = {}
    results = {}
    for count in worker_counts:
        if count > 1:
            clusters[count] = Cluster(count)
        for optimizer in OPTIMIZERS:
            for pull in PULLS:
                runs = []
                for seed in range(FLAGS.seeds):
                    runs.append(run_once(count, optimizer, pull, seed, clusters.get(count)))
                results[count, optimizer, pull] = runs
                print(
                    f"{count} worker(s), {optimizer}, {pull}: "
                    + "; ".join(f"loss {r[0]:.3f} acc {r[1]:.3f} steps {r[2]}" for r in runs),
                    file=sys.stderr,
                    flush=True,
                )
    seconds = time.monotonic() - start
    command = "python -m benchmarks.rho_forms " + " ".join(
        FLAGS[name].serialize() for name in ("steps", "seeds", "workers", "eval_every", "target")
    )
    print(table(results, worker_counts))
    print()
    print(
        f"`{command}`: {FLAGS.steps} local steps per worker, median of {FLAGS.seeds} "
        f"seed{'s' * (FLAGS.seeds != 1)}; {seconds / 60:.1f} min on {os.cpu_count()} cores, "
        f"TensorFlow {tf.__version__}, Python {platform.python_version()}."
    )


if __name__ == "__main__":
    app.run(main)
