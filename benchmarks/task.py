"""One process of a benchmark cluster: a parameter server, or a worker driven over a pipe.

    python -m benchmarks.task --role=ps --index=0 --cluster='{"ps": [...], "worker": [...]}'
    python -m benchmarks.task --role=worker --index=1 --cluster=... --world=tf1

A parameter server serves until it is killed. A worker reads one JSON command per line on
stdin and answers each with one line `BENCH <json>` on stdout (other output goes to
stderr). `cluster.py` starts these processes; `run.py` drives them.
"""

import json
import os
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarks import accuracy, graphs, models, overhead  # noqa: E402
from benchmarks.models_py37 import fingerprint  # noqa: E402
from benchmarks.task_protocol import reply, serve_commands  # noqa: E402

flags.DEFINE_enum("role", "worker", ["ps", "worker"], "Task kind.")
flags.DEFINE_integer("index", 0, "Task index within its job.")
flags.DEFINE_string("cluster", None, "ClusterSpec as JSON: {'ps': [...], 'worker': [...]}.")
flags.DEFINE_enum("world", "tf1", ["tf1", "tf2"], "Variable world: ref or resource variables.")
FLAGS = flags.FLAGS

# A blocked session.run fails after this long instead of hanging the benchmark.
OPERATION_TIMEOUT_MS = 60_000
# A step of SyncReplicasOptimizer waits for the other workers; after the measured window
# the others may have stopped, so such a step gives up this long after the window's end.
SYNC_TAIL_TIMEOUT_MS = 3_000


def lo_bytes():
    """Bytes sent on the loopback interface of this process's network namespace."""
    with open("/proc/self/net/dev") as dev:
        for line in dev:
            name, _, counters = line.partition(":")
            if name.strip() == "lo":
                return int(counters.split()[8])  # Transmit bytes (= received, on lo).
    raise RuntimeError("no loopback interface in /proc/self/net/dev")


class Worker:
    """A worker task: its server and the graph of the configuration being measured."""

    def __init__(self, cluster, index):
        self.index = index
        self.cluster_spec = tf.train.ClusterSpec(cluster)
        self.server = tf.distribute.Server(
            self.cluster_spec, job_name="worker", task_index=index, start=True
        )
        self.built = None
        self.accuracy = None
        self.batch = None
        self.session = None
        self.coordinator = None
        self.threads = []

    # Commands: each returns a JSON-serialisable dict.

    def build(
        self, config, model, num_workers, container, learning_rate=0.01, standalone_exchange=False
    ):
        """Builds `config` for `model` (digits: the time-to-accuracy set-up) and starts it.

        Worker 0 initialises the shared state; the driver builds the others after it.
        `standalone_exchange` builds EASGD's exchange as an op of its own too (`exchange`).
        """
        self.close()
        started = time.monotonic()
        if model == accuracy.SPEC.name:
            self.built, self.accuracy = accuracy.build(
                self, config, num_workers, learning_rate, container
            )
        else:
            spec = models.MODELS[model]
            images, labels = self.batch = models.synthetic_batch(spec, seed=self.index)
            self.built = graphs.build(
                config,
                spec,
                self.cluster_spec,
                self.index,
                num_workers,
                learning_rate,
                lambda: (tf.constant(images), tf.constant(labels)),
                container=container,
                standalone_exchange=standalone_exchange,
            )
            self.accuracy = None
        self.session = tf.compat.v1.Session(
            self.server.target,
            graph=self.built.graph,
            config=tf.compat.v1.ConfigProto(
                device_filters=["/job:ps", f"/job:worker/task:{self.index}"],
                operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
                share_cluster_devices_in_session=self.built.share_devices,
            ),
        )
        for op in self.built.chief_init if self.index == 0 else self.built.worker_init:
            self.session.run(op)
        transport = None
        if self.built.easgd_optimizer is not None:
            transport = self.built.easgd_optimizer.choose_exchange_transport(self.session)
        sync = self.built.sync_optimizer
        runners = self.built.graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
        if sync is not None and self.index == 0:
            runners.append(sync.get_chief_queue_runner())
        if runners:  # The chief's of `sync`, the exchange's of `easgd-P-overlap`.
            self.coordinator = tf.train.Coordinator()
            for runner in runners:
                self.threads += runner.create_threads(
                    self.session, coord=self.coordinator, daemon=True, start=True
                )
        return {"build_secs": time.monotonic() - started, "transport": transport}

    def run(self, start_at, seconds):
        """Steps until wall time `start_at`, then counts the steps of the next `seconds`."""
        is_sync = self.built.sync_optimizer is not None
        options = tf.compat.v1.RunOptions(timeout_in_ms=OPERATION_TIMEOUT_MS)
        warm = 0
        while time.time() < start_at or warm < 2:
            self.session.run(self.built.train_op, options=options)
            warm += 1
        end = start_at + seconds
        steps, last = 0, start_at
        while True:
            try:
                self.session.run(
                    self.built.train_op, options=_sync_options(end) if is_sync else options
                )
            except tf.errors.DeadlineExceededError:
                if time.time() < end:
                    raise
                break
            now = time.time()
            if now > end:
                break
            steps, last = steps + 1, now
        # `elapsed` ends at the last step counted: with steps of seconds (a slow link), the
        # rate over it is exact where `steps_per_sec` rounds down to whole steps.
        return {
            "warm_steps": warm,
            "steps": steps,
            "steps_per_sec": steps / seconds,
            "elapsed": last - start_at,
        }

    def exchange(self, count):
        """Runs the exchange alone (`build(standalone_exchange=True)`) `count` times; returns
        the wall seconds of each."""
        seconds = []
        for _ in range(count):
            started = time.perf_counter()
            self.session.run(self.built.exchange_op)
            seconds.append(time.perf_counter() - started)
        return {"secs": seconds}

    def fingerprint(self):
        """Digests of the worker's parameters and batch, and its loss, before any step.

        The side-by-side with contrib (run.py) compares these with TensorFlow 1.15's
        (contrib_task.py): the same model, the same values, the same batch.
        """
        with self.built.graph.as_default():
            variables = tf.compat.v1.trainable_variables()
        return fingerprint(self.session, variables, self.built.loss, *self.batch)

    def count_bytes(self, warm_steps, steps):
        """Runs `warm_steps`, then `steps` local steps; returns the loopback bytes of those."""
        for _ in range(warm_steps):
            self.session.run(self.built.train_op)
        before = lo_bytes()
        for _ in range(steps):
            self.session.run(self.built.train_op)
        return {"steps": steps, "lo_bytes": lo_bytes() - before}

    def train(self, start_at, seconds, eval_every):
        """Time to accuracy: trains for `seconds` from `start_at`; worker 0 evaluates."""
        return accuracy.train(
            self.session,
            self.built.train_op,
            self.accuracy if self.index == 0 else None,
            start_at,
            seconds,
            eval_every,
            _sync_options if self.built.sync_optimizer is not None else None,
        )

    def overhead(self, model, blocks, block_secs):
        """Per-step overhead, measured in this process without the cluster."""
        self.close()
        return overhead.measure(model, blocks, block_secs)

    def close(self):
        """Stops the queue runners of `sync` and closes the session."""
        if self.coordinator is not None:
            self.coordinator.request_stop()
        if self.session is not None:
            self.session.close()
        if self.coordinator is not None:
            self.coordinator.join(self.threads, stop_grace_period_secs=5, ignore_live_threads=True)
        self.session = self.coordinator = self.built = self.accuracy = self.batch = None
        self.threads = []
        return {}

    def reset(self, containers):
        """Frees the state of `containers` on every task (once every worker has closed)."""
        self.close()
        tf.compat.v1.Session.reset(self.server.target, containers)
        return {}


def _sync_options(end):
    """The RunOptions of a step of `sync` in a window ending at wall time `end`: the rest
    of the window and SYNC_TAIL_TIMEOUT_MS more (a step on a slow link takes seconds)."""
    remaining_ms = max(0.0, end - time.time()) * 1000
    return tf.compat.v1.RunOptions(timeout_in_ms=int(remaining_ms) + SYNC_TAIL_TIMEOUT_MS)


def serve(worker_class):
    """Runs this process's task, as the flags say: a ps serves, a worker takes commands.

    Args:
        worker_class: the class of the worker, `Worker` or a subclass of it.
    """
    if FLAGS.world == "tf1":
        tf.compat.v1.disable_v2_behavior()
    cluster = json.loads(FLAGS.cluster)
    if FLAGS.role == "ps":
        server = tf.distribute.Server(
            tf.train.ClusterSpec(cluster), job_name="ps", task_index=FLAGS.index, start=True
        )
        reply({"ok": True, "ready": "ps", "target": server.target})
        threading.Event().wait()  # Serves until the driver kills this process.
        return
    worker = worker_class(cluster, FLAGS.index)
    reply({"ok": True, "ready": "worker"})
    serve_commands(worker, sys.stdin, reply)


def main(argv):
    del argv  # Unused.
    serve(Worker)


if __name__ == "__main__":
    app.run(main)
