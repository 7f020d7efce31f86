"""One process of a benchmark cluster: a parameter server, or a worker driven over a pipe.

    python -m benchmarks.common.task --role=worker --index=1 --world=tf1 \
        --cluster='{"ps": [...], ...}'

A worker answers the commands of harness.BenchCluster, each a method of `Worker`.
"""

import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from benchmarks.common import graphs, models, protocol  # noqa: E402
from tf_contrib_easgd.trainer import data  # noqa: E402

#: A step of `sync` waits for the other workers, which may have stopped after the window:
#: it gives up this long after the window's end.
SYNC_TAIL_TIMEOUT_MS = 3_000
NEVER = 2**30  # A period no run reaches: section 4's steps never exchange.


class Worker(models.SessionWorker):
    """A worker task: its server and the graph of the configuration being measured."""

    def build(self, config, model, num_workers, container, learning_rate=0.01,
              standalone_exchange=False):  # fmt: skip
        """Builds `config` for `model` and starts it (worker 0 initialises, first); on the
        digits, with the test accuracy of the shared model."""
        self.close()
        started, spec, self.accuracy = time.monotonic(), protocol.MODELS[model], None
        digits = spec is protocol.DIGITS_MLP
        if digits:
            inputs, (images, labels) = _digits_inputs(self.index)
        else:
            self.batch = protocol.synthetic_batch(spec, seed=self.index)

            def inputs():
                return tuple(map(tf.constant, self.batch))

        where = (self.cluster_spec, self.index, num_workers, learning_rate)
        built = graphs.build(config, spec, *where, inputs, container, standalone_exchange)
        if digits:
            with built.graph.as_default(), tf.compat.v1.device(f"/job:worker/task:{self.index}"):
                net = models.logits(spec, built.shared_params, tf.constant(images))
                correct = tf.equal(tf.argmax(net, axis=1), tf.constant(labels))
                self.accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        self.open(built)
        easgd = built.easgd_optimizer
        transport = None if easgd is None else easgd.choose_exchange_transport(self.session)
        return {"build_secs": time.monotonic() - started, "transport": transport}

    def _step(self, end=None):
        """One local step; with a window's `end`, a step of `sync` may wait for the others
        until SYNC_TAIL_TIMEOUT_MS after it, and returns False when it gave up there."""
        timeout_ms = models.OPERATION_TIMEOUT_MS
        if end is not None and self.built.sync_optimizer is not None:
            timeout_ms = int(max(0.0, end - time.time()) * 1000) + SYNC_TAIL_TIMEOUT_MS
        try:
            models.run_step(self.session, self.built.train_op, timeout_ms)
        except tf.errors.DeadlineExceededError:
            if end is None or time.time() < end:
                raise
            return False
        return True

    def train(self, start_at, seconds, eval_every=None, log_every=None):
        """Trains from wall time `start_at` for `seconds`. With `eval_every` (seconds),
        worker 0 records its "curve" [(secs, test accuracy, steps)]; with `log_every`
        (steps), every worker records its "log" [[secs, steps(, accuracy on worker 0)]]."""
        evaluate = self.accuracy if self.index == 0 else None
        time.sleep(max(start_at - time.time(), 0))
        steps, points, next_eval, end = 0, [], start_at, start_at + seconds
        while True:
            now = time.time()
            if log_every and steps % log_every == 0:
                accuracy = [] if evaluate is None else [float(self.session.run(evaluate))]
                points.append([now - start_at, steps, *accuracy])
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
        global_step = tf.compat.v1.train.get_global_step(self.built.graph)
        optimizer = self.built.easgd_optimizer
        return {
            "accuracy": float(self.session.run(self.accuracy)),
            "global_step": None if global_step is None else int(self.session.run(global_step)),
            "moving_rate": None if optimizer is None else float(optimizer.moving_rate),
            "rho": None if optimizer is None else float(optimizer._rho),  # The default, computed.
        }

    def exchange(self, count):
        """Runs the standalone exchange `count` times; the wall seconds of each."""
        return {"secs": _timed([self.built.exchange_op] * count, self.session)}

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
        spec, runs = protocol.MODELS[model], {}
        for index in range(graphs_per_config):
            for key in ("sgd", "easgd", "cond"):
                built = graphs.plain(f"easgd-{NEVER}" if key == "easgd" else "local", spec)
                if key == "cond":
                    built = graphs.with_empty_cond(built, NEVER)
                session = tf.compat.v1.Session(graph=built.graph)
                _timed([*built.chief_init, *[built.train_op] * warm_steps], session)
                runs[key, index] = (session, built.train_op)
        session, train_op = runs["sgd", 0]
        secs_per_step = statistics.fmean(_timed([train_op] * warm_steps, session))
        steps, times = max(5, round(block_secs / secs_per_step)), {key: [] for key, _ in runs}
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
        medians = {key: statistics.median(values) for key, values in times.items()}
        return {"graphs_per_config": graphs_per_config, "steps_per_block": steps,
                "block_secs_per_step": times, "median_secs_per_step": medians}  # fmt: skip


def _timed(ops, session):
    """Runs `ops` one after the other; the wall seconds of each."""
    seconds = []
    for op in ops:
        started = time.perf_counter()
        session.run(op)
        seconds.append(time.perf_counter() - started)
    return seconds


def _digits_inputs(index):
    """A random batch of the digits' training split a step, and the test split."""
    digits = data.load_digits()
    train_images = digits.x_train.reshape(len(digits.x_train), -1)
    batch = protocol.DIGITS_MLP.batch_size

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


if __name__ == "__main__":
    models.serve(Worker)
