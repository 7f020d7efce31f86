"""One process of a benchmark cluster: a parameter server, or a worker driven over a pipe.

    python -m benchmarks.task --role=worker --index=1 --cluster='{"ps": [...], ...}' --world=tf1

A ps serves until killed; a worker answers protocol.py's commands, each a method of
`Worker`. harness.BenchCluster starts these processes.
"""

import json
import os
import statistics
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarks import graphs, models, specs  # noqa: E402
from benchmarks.protocol import fingerprint, reply, serve_commands  # noqa: E402
from tf_contrib_easgd.trainer import data  # noqa: E402

flags.DEFINE_enum("role", "worker", ["ps", "worker"], "Task kind.")
flags.DEFINE_integer("index", 0, "Task index within its job.")
flags.DEFINE_string("cluster", None, "ClusterSpec as JSON: {'ps': [...], 'worker': [...]}.")
flags.DEFINE_enum("world", "tf1", ["tf1", "tf2"], "Variable world: ref or resource variables.")
FLAGS = flags.FLAGS

#: A step of `sync` waits for the other workers, which may have stopped after the window:
#: it gives up this long after the window's end.
SYNC_TAIL_TIMEOUT_MS = 3_000
NEVER = 2**30  # A period no run reaches: section 4's steps never exchange.


class Worker:
    """A worker task: its server and the graph of the configuration being measured."""

    def __init__(self, cluster, index):
        self.index = index
        self.cluster_spec = tf.train.ClusterSpec(cluster)
        self.server = tf.distribute.Server(self.cluster_spec, "worker", index, start=True)
        self.built = self.accuracy = self.batch = self.session = self.coordinator = None
        self.threads = []

    def build(
        self, config, model, num_workers, container, learning_rate=0.01, standalone_exchange=False
    ):
        """Builds `config` for `model` and starts it (worker 0 initialises, first); on the
        digits, with the test accuracy of the shared model."""
        self.close()
        started = time.monotonic()
        spec = specs.MODELS[model]
        if spec is specs.DIGITS_MLP:
            inputs, test = _digits_inputs(self.index)
        else:
            self.batch = specs.synthetic_batch(spec, seed=self.index)
            inputs, test = (lambda: tuple(map(tf.constant, self.batch))), None
        where = (self.cluster_spec, self.index, num_workers, learning_rate)
        self.built = graphs.build(config, spec, *where, inputs, container, standalone_exchange)
        if test is not None:
            with (
                self.built.graph.as_default(),
                tf.compat.v1.device(f"/job:worker/task:{self.index}"),
            ):
                logits = models.logits(
                    spec.as_json(), self.built.shared_params, tf.constant(test[0])
                )
                correct = tf.equal(tf.argmax(logits, axis=1), tf.constant(test[1]))
                self.accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        self.session = tf.compat.v1.Session(
            self.server.target,
            graph=self.built.graph,
            config=tf.compat.v1.ConfigProto(
                device_filters=["/job:ps", f"/job:worker/task:{self.index}"],
                operation_timeout_in_ms=graphs.OPERATION_TIMEOUT_MS,
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

    def _step(self, end=None):
        """One local step; with a window's `end`, a step of `sync` may wait for the others
        until SYNC_TAIL_TIMEOUT_MS after it, and returns False when it gave up there."""
        timeout_ms = graphs.OPERATION_TIMEOUT_MS
        if end is not None and self.built.sync_optimizer is not None:
            timeout_ms = int(max(0.0, end - time.time()) * 1000) + SYNC_TAIL_TIMEOUT_MS
        options = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)
        try:
            self.session.run(self.built.train_op, options=options)
        except tf.errors.DeadlineExceededError:
            if end is None or time.time() < end:
                raise
            return False
        return True

    def run(self, start_at, seconds):
        """Steps until wall time `start_at` (two at least), then counts the steps of the
        next `seconds`; `elapsed` ends at the last step counted."""
        warm = 0
        while time.time() < start_at or warm < 2:
            self._step()
            warm += 1
        end = start_at + seconds
        steps, last = 0, start_at
        while self._step(end) and (now := time.time()) <= end:
            steps, last = steps + 1, now
        return {
            "warm_steps": warm,
            "steps": steps,
            "steps_per_sec": steps / seconds,
            "elapsed": last - start_at,
        }

    def train(self, start_at, seconds, eval_every=None, log_every=None):
        """Trains from wall time `start_at` for `seconds`. With `eval_every` (seconds),
        worker 0 records its "curve" [(secs, test accuracy, steps)]; with `log_every`
        (steps), every worker records its "log" [[secs, steps(, accuracy on worker 0)]]."""
        evaluate = self.accuracy if self.index == 0 else None
        while time.time() < start_at:
            time.sleep(min(0.01, max(start_at - time.time(), 0)))
        steps, points, next_eval, end = 0, [], start_at, start_at + seconds
        while True:
            now = time.time()
            if log_every and steps % log_every == 0:
                point = [now - start_at, steps]
                points.append(
                    point + ([float(self.session.run(evaluate))] if evaluate is not None else [])
                )
            elif eval_every and evaluate is not None and now >= next_eval:
                points.append((now - start_at, float(self.session.run(evaluate)), steps))
                next_eval += eval_every
            if now >= end or not self._step(end):
                break
            steps += 1
        return {"steps": steps, ("log" if log_every else "curve"): points}

    def finish(self):
        """Worker 0 after a tuning run: the final accuracy, global_step, and the moving
        rate and rho the optimizer holds (None where the configuration has none)."""
        answer = {
            "accuracy": float(self.session.run(self.accuracy)),
            "global_step": None,
            "moving_rate": None,
            "rho": None,
        }
        global_step = tf.compat.v1.train.get_global_step(self.built.graph)
        if global_step is not None:
            answer["global_step"] = int(self.session.run(global_step))
        if self.built.easgd_optimizer is not None:
            answer["moving_rate"] = float(self.built.easgd_optimizer.moving_rate)
            answer["rho"] = float(self.built.easgd_optimizer._rho)  # The default, computed.
        return answer

    def exchange(self, count):
        """Runs the standalone exchange `count` times; the wall seconds of each."""
        seconds = []
        for _ in range(count):
            started = time.perf_counter()
            self.session.run(self.built.exchange_op)
            seconds.append(time.perf_counter() - started)
        return {"secs": seconds}

    def fingerprint(self):
        with self.built.graph.as_default():
            variables = tf.compat.v1.trainable_variables()
        return fingerprint(self.session, variables, self.built.loss, *self.batch)

    def count_bytes(self, warm_steps, steps):
        """Loopback bytes sent during `steps` local steps, after `warm_steps`."""
        for _ in range(warm_steps):
            self._step()
        before = _lo_bytes()
        for _ in range(steps):
            self._step()
        return {"steps": steps, "lo_bytes": _lo_bytes() - before}

    def overhead(self, model, blocks, block_secs, graphs_per_config=3, warm_steps=20):
        """Seconds per step of plain SGD ("sgd"), EASGD on steps that never exchange
        ("easgd") and SGD + an empty cond ("cond"), in this process without the cluster:
        `graphs_per_config` graphs each, `blocks` rounds of alternating blocks of steps."""
        self.close()
        spec = specs.MODELS[model]
        images, labels = specs.synthetic_batch(spec)
        runs = {}
        for index in range(graphs_per_config):
            for key in ("sgd", "easgd", "cond"):
                built = graphs.build(
                    "local" if key != "easgd" else f"easgd-{NEVER}",
                    spec,
                    None,
                    0,
                    1,
                    0.01,
                    lambda: (tf.constant(images), tf.constant(labels)),
                )
                if key == "cond":
                    built = graphs.with_empty_cond(built, NEVER)
                session = tf.compat.v1.Session(graph=built.graph)
                for op in [*built.chief_init, *[built.train_op] * warm_steps]:
                    session.run(op)
                runs[key, index] = (session, built.train_op)
        session, train_op = runs["sgd", 0]
        started = time.perf_counter()
        for _ in range(warm_steps):
            session.run(train_op)
        steps = max(5, round(block_secs * warm_steps / (time.perf_counter() - started)))
        times = {key: [] for key, _ in runs}
        try:
            for block in range(blocks):
                for key, index in list(runs) if block % 2 == 0 else list(reversed(runs)):
                    session, train_op = runs[key, index]
                    started = time.perf_counter()
                    for _ in range(steps):
                        session.run(train_op)
                    times[key].append((time.perf_counter() - started) / steps)
        finally:
            for session, _ in runs.values():
                session.close()
        return {
            "graphs_per_config": graphs_per_config,
            "steps_per_block": steps,
            "block_secs_per_step": times,
            "median_secs_per_step": {k: statistics.median(v) for k, v in times.items()},
        }

    def close(self):
        """Stops the queue runners and closes the session."""
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


def _digits_inputs(index):
    """A random batch of the digits' training split a step, and the test split."""
    digits = data.load_digits()
    train_images = digits.x_train.reshape(len(digits.x_train), -1)
    batch = specs.DIGITS_MLP.batch_size

    def inputs():
        pick = tf.random.uniform([batch], 0, len(train_images), dtype=tf.int32, seed=index + 1)
        images, labels = tf.constant(train_images), tf.constant(digits.y_train)
        return tf.gather(images, pick), tf.gather(labels, pick)

    return inputs, (digits.x_test.reshape(len(digits.x_test), -1), digits.y_test)


def _lo_bytes():
    """Bytes sent on the loopback interface of this process's network namespace."""
    with open("/proc/self/net/dev") as dev:
        for line in dev:
            name, _, counters = line.partition(":")
            if name.strip() == "lo":
                return int(counters.split()[8])  # Transmit bytes (= received, on lo).
    raise RuntimeError("no loopback interface in /proc/self/net/dev")


def serve(worker_class):
    """Runs this process's task as the flags say: a ps serves, a worker takes commands."""
    if FLAGS.world == "tf1":
        tf.compat.v1.disable_v2_behavior()
    cluster = json.loads(FLAGS.cluster)
    if FLAGS.role == "ps":
        server = tf.distribute.Server(tf.train.ClusterSpec(cluster), "ps", FLAGS.index, start=True)
        reply({"ok": True, "ready": "ps", "target": server.target})
        threading.Event().wait()  # Serves until the driver kills this process.
    worker = worker_class(cluster, FLAGS.index)
    reply({"ok": True, "ready": "worker"})
    serve_commands(worker, sys.stdin)


if __name__ == "__main__":
    app.run(lambda argv: serve(Worker))
