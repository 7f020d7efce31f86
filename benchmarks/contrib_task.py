"""One process of a TensorFlow 1.15 benchmark cluster, training with the original contrib EASGD.

    .venv-tf115/bin/python -m benchmarks.contrib_task --role=ps --index=0 --cluster=JSON
    .venv-tf115/bin/python -m benchmarks.contrib_task --role=worker --index=1 --cluster=JSON

The counterpart of task.py for the "contrib" section of run.py: `cluster.BenchCluster`
starts these processes with TensorFlow 1.15's interpreter, and the driver talks to them as
to task.py's, with the same protocol (one JSON command per line on stdin, one `BENCH
<json>` answer per line on stdout) and the same commands: build, fingerprint, run, close,
reset, exit. `run` measures as task.py's does (steps until a common wall-clock instant,
then the steps of a fixed window); the session has task.py's ConfigProto.

Configurations, built as graphs.py builds their namesakes on the model of models_py37.py:

- `local`: no parameter server; the worker trains its own variables (the ceiling).
- `contrib-easgd-P`: `tf.contrib.opt.ElasticAverageOptimizer` wrapping
  `GradientDescentOptimizer`, communication period P, the default moving rate (0.9 / P /
  workers) and rho=0, with its `ElasticAverageCustomGetter` inside a
  `replica_device_setter`, as graphs.py's `easgd-P`; worker 0 runs the global and local
  initialisers and `get_init_op(0)`, the others, after it, the local ones and their own
  `get_init_op`.

Python 3.7 syntax only (benchmarks/ruff.toml gives ruff this file's target version).
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

import tensorflow as tf  # noqa: E402

from benchmarks import models_py37  # noqa: E402
from benchmarks.task_protocol import reply, serve_commands  # noqa: E402

# As task.py: a blocked session.run fails after this long instead of hanging the benchmark.
OPERATION_TIMEOUT_MS = 60000
CONFIGS = re.compile(r"^(local|contrib-easgd-(\d+))$")


class Built:
    """A configuration's graph: what `Worker.build` returns (graphs.Built's fields used)."""

    def __init__(self, graph, train_op, loss, chief_init, worker_init):
        self.graph = graph
        self.train_op = train_op
        self.loss = loss
        self.chief_init = chief_init
        self.worker_init = worker_init


def build_graph(
    config, spec, cluster_spec, task_index, num_workers, learning_rate, batch, container=""
):
    """Worker `task_index`'s graph of `config` (see the module docstring); returns a `Built`.

    Args:
        config: "local" or "contrib-easgd-P".
        spec: the model's spec as JSON (`specs.ModelSpec.as_json()`).
        cluster_spec: the `tf.train.ClusterSpec`.
        task_index: this worker's index.
        num_workers: workers taking part.
        learning_rate: SGD learning rate.
        batch: the step's (images, labels) as numpy arrays, held on the worker.
        container: resource container of every variable (fresh state per run).
    """
    match = CONFIGS.match(config)
    if not match:
        raise ValueError(f"Unknown configuration {config!r}; valid: 'local', 'contrib-easgd-P'")
    from tensorflow.contrib.opt import (  # noqa: PLC0415 - contrib loads slowly; only here.
        ElasticAverageCustomGetter,
        ElasticAverageOptimizer,
    )

    worker_device = f"/job:worker/task:{task_index}"
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.container(container):
        with tf.compat.v1.device(worker_device):
            images, labels = tf.constant(batch[0]), tf.constant(batch[1])
        sgd = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        if config == "local":
            with tf.compat.v1.device(worker_device):
                params = models_py37.make_params(spec)
                loss = models_py37.loss(spec, params, images, labels)
                train_op = sgd.minimize(loss)
            own_init = [
                tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
            ]
            return Built(graph, train_op, loss, own_init, own_init)
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=worker_device, cluster=cluster_spec
        )
        getter = ElasticAverageCustomGetter(worker_device)
        # One `with` of two contexts, not parenthesized (Python 3.7).
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            params = models_py37.make_params(spec)
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                sgd,
                num_workers,
                getter,
                communication_period=int(match.group(2)),
                moving_rate=None,
                rho=0.0,
            )
            loss = models_py37.loss(spec, params, images, labels)
            train_op = opt.minimize(loss, global_step=global_step)
            worker_init = [tf.compat.v1.local_variables_initializer(), opt.get_init_op(task_index)]
            chief_init = [tf.compat.v1.global_variables_initializer(), *worker_init]
        return Built(graph, train_op, loss, chief_init, worker_init)


class Worker:
    """A worker task: its server and the graph of the configuration being measured."""

    def __init__(self, cluster, index):
        self.index = index
        self.cluster_spec = tf.train.ClusterSpec(cluster)
        self.server = tf.compat.v1.train.Server(
            self.cluster_spec, job_name="worker", task_index=index, start=True
        )
        self.built = None
        self.batch = None
        self.session = None

    # Commands: each returns a JSON-serialisable dict.

    def build(self, config, spec, batch_dir, num_workers, container, learning_rate=0.01):
        """Builds `config` for the model `spec` on this worker's batch in `batch_dir`.

        The batch is `<batch_dir>/<model>-worker<index>.npz` (run.py writes it). Worker 0
        initialises the shared state; the driver builds the others after it.
        """
        self.close()
        started = time.monotonic()
        self.batch = models_py37.load_batch(
            os.path.join(batch_dir, "{}-worker{}.npz".format(spec["name"], self.index))
        )
        self.built = build_graph(
            config,
            spec,
            self.cluster_spec,
            self.index,
            num_workers,
            learning_rate,
            self.batch,
            container,
        )
        self.session = tf.compat.v1.Session(
            self.server.target,
            graph=self.built.graph,
            config=tf.compat.v1.ConfigProto(
                device_filters=["/job:ps", f"/job:worker/task:{self.index}"],
                operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
                experimental=tf.compat.v1.ConfigProto.Experimental(
                    share_cluster_devices_in_session=True
                ),
            ),
        )
        for op in self.built.chief_init if self.index == 0 else self.built.worker_init:
            self.session.run(op)
        return {"build_secs": time.monotonic() - started, "transport": None}

    def fingerprint(self):
        """Digests of the parameters and batch, and the loss, before any step (task.py's)."""
        with self.built.graph.as_default():
            variables = tf.compat.v1.trainable_variables()
        return models_py37.fingerprint(self.session, variables, self.built.loss, *self.batch)

    def run(self, start_at, seconds):
        """Steps until wall time `start_at`, then counts the steps of the next `seconds`."""
        options = tf.compat.v1.RunOptions(timeout_in_ms=OPERATION_TIMEOUT_MS)
        warm = 0
        while time.time() < start_at or warm < 2:
            self.session.run(self.built.train_op, options=options)
            warm += 1
        end = start_at + seconds
        steps = 0
        while True:
            self.session.run(self.built.train_op, options=options)
            if time.time() > end:
                break
            steps += 1
        return {"warm_steps": warm, "steps": steps, "steps_per_sec": steps / seconds}

    def close(self):
        """Closes the session."""
        if self.session is not None:
            self.session.close()
        self.session = self.built = self.batch = None
        return {}

    def reset(self, containers):
        """Frees the state of `containers` on every task (once every worker has closed)."""
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
    versions = {"tensorflow": tf.__version__, "python": platform.python_version()}
    if args.role == "ps":
        server = tf.compat.v1.train.Server(
            tf.train.ClusterSpec(cluster), job_name="ps", task_index=args.index, start=True
        )
        target = server.target
        target = target.decode() if isinstance(target, bytes) else target
        message = {"ok": True, "ready": "ps", "target": target}
        message.update(versions)
        reply(message)
        threading.Event().wait()  # Serves until the driver kills this process.
        return
    worker = Worker(cluster, args.index)
    message = {"ok": True, "ready": "worker"}
    message.update(versions)
    reply(message)
    serve_commands(worker, sys.stdin, reply)


if __name__ == "__main__":
    main()
