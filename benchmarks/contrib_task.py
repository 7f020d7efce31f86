"""One process of the contrib section's TensorFlow 1.15 cluster: the original contrib EASGD.

    .venv-tf115/bin/python -m benchmarks.contrib_task --role=worker --index=1 --cluster=JSON

task.py's counterpart under TensorFlow 1.15 (Python 3.7 code): the same protocol, and the
commands build, fingerprint, run, close, reset with task.py's session `ConfigProto`.
`local` trains the worker's own variables; `contrib-easgd-P` is
`tf.contrib.opt.ElasticAverageOptimizer(GradientDescentOptimizer)`, period P, the default
moving rate, rho 0, its getter inside a `replica_device_setter`, as graphs.py's `easgd-P`.
"""

import argparse
import json
import os
import platform
import re
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks import models  # noqa: E402
from benchmarks.protocol import fingerprint, reply, serve_commands  # noqa: E402

OPERATION_TIMEOUT_MS = 60000  # As task.py's.
CONFIGS = re.compile(r"^(local|contrib-easgd-(\d+))$")


def build_graph(config, spec, cluster_spec, index, num_workers, learning_rate, batch, container):
    """Worker `index`'s graph of `config` for `spec` (JSON) on `batch` (numpy arrays):
    (graph, train op, loss, init ops of worker 0, init ops of the others)."""
    match = CONFIGS.match(config)
    if not match:
        raise ValueError(f"Unknown configuration {config!r}; valid: local, contrib-easgd-P")
    from tensorflow.contrib.opt import (  # noqa: PLC0415 - contrib loads slowly; only here.
        ElasticAverageCustomGetter,
        ElasticAverageOptimizer,
    )

    worker_device = f"/job:worker/task:{index}"
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.container(container):
        with tf.compat.v1.device(worker_device):
            images, labels = tf.constant(batch[0]), tf.constant(batch[1])
        sgd = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        if config == "local":
            with tf.compat.v1.device(worker_device):
                params = models.make_params(spec)
                loss = models.loss(spec, params, images, labels)
                train_op = sgd.minimize(loss)
            init = [
                tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
            ]
            return graph, train_op, loss, init, init
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=worker_device, cluster=cluster_spec
        )
        getter = ElasticAverageCustomGetter(worker_device)
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            params = models.make_params(spec)
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                sgd,
                num_workers,
                getter,
                communication_period=int(match.group(2)),
                moving_rate=None,
                rho=0.0,
            )
            loss = models.loss(spec, params, images, labels)
            train_op = opt.minimize(loss, global_step=global_step)
            worker_init = [tf.compat.v1.local_variables_initializer(), opt.get_init_op(index)]
            chief_init = [tf.compat.v1.global_variables_initializer()] + worker_init
        return graph, train_op, loss, chief_init, worker_init


class Worker:
    """A worker task: its server and the graph of the configuration being measured."""

    def __init__(self, cluster, index):
        self.index = index
        self.cluster_spec = tf.train.ClusterSpec(cluster)
        self.server = tf.compat.v1.train.Server(self.cluster_spec, "worker", index, start=True)
        self.session = self.built = self.batch = None

    def build(self, config, spec, batch_dir, num_workers, container, learning_rate=0.01):
        """Builds `config` on this worker's batch, `<batch_dir>/<model>-worker<index>.npz`."""
        self.close()
        started = time.monotonic()
        path = os.path.join(batch_dir, "{}-worker{}.npz".format(spec["name"], self.index))
        with np.load(path, allow_pickle=False) as arrays:
            self.batch = arrays["images"], arrays["labels"]
        where = (self.cluster_spec, self.index, num_workers, learning_rate)
        self.built = build_graph(config, spec, *where, self.batch, container)
        graph, _, _, chief_init, worker_init = self.built
        self.session = tf.compat.v1.Session(
            self.server.target,
            graph=graph,
            config=tf.compat.v1.ConfigProto(
                device_filters=["/job:ps", f"/job:worker/task:{self.index}"],
                operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
                experimental=tf.compat.v1.ConfigProto.Experimental(
                    share_cluster_devices_in_session=True
                ),
            ),
        )
        for op in chief_init if self.index == 0 else worker_init:
            self.session.run(op)
        return {"build_secs": time.monotonic() - started, "transport": None}

    def fingerprint(self):
        graph, _, loss, _, _ = self.built
        with graph.as_default():
            variables = tf.compat.v1.trainable_variables()
        return fingerprint(self.session, variables, loss, *self.batch)

    def run(self, start_at, seconds):
        """Steps until wall time `start_at`, then counts the steps of the next `seconds`."""
        options = tf.compat.v1.RunOptions(timeout_in_ms=OPERATION_TIMEOUT_MS)
        warm = steps = 0
        while time.time() < start_at or warm < 2:
            self.session.run(self.built[1], options=options)
            warm += 1
        end = start_at + seconds
        while True:
            self.session.run(self.built[1], options=options)
            if time.time() > end:
                break
            steps += 1
        return {"warm_steps": warm, "steps": steps, "steps_per_sec": steps / seconds}

    def close(self):
        if self.session is not None:
            self.session.close()
        self.session = self.built = self.batch = None
        return {}

    def reset(self, containers):
        self.close()
        tf.compat.v1.Session.reset(self.server.target, containers)
        return {}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("ps", "worker"), default="worker")
    parser.add_argument("--index", type=int, default=0, help="Task index within its job.")
    parser.add_argument("--cluster", required=True, help="ClusterSpec as JSON.")
    parser.add_argument("--world", choices=("tf1",), default="tf1", help="Ref variables only.")
    args = parser.parse_args(argv)
    cluster = json.loads(args.cluster)
    message = {
        "ok": True,
        "ready": args.role,
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
    }
    if args.role == "ps":
        server = tf.compat.v1.train.Server(tf.train.ClusterSpec(cluster), "ps", args.index)
        target = server.target  # bytes under TensorFlow 1.15.
        reply(dict(message, target=target.decode() if isinstance(target, bytes) else target))
        threading.Event().wait()  # Serves until the driver kills this process.
    worker = Worker(cluster, args.index)
    reply(message)
    serve_commands(worker, sys.stdin)


if __name__ == "__main__":
    main()
