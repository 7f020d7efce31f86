"""One process of the scale harness (scale.py): a parameter server, or a host of workers.

    python -m benchmarks.scale_task --role=workers --workers=0,4,8 --cluster=JSON

A host runs one server per worker task, each with its own graph and session; a worker's
local step is a wait of the calibrated compute time, and every `period`-th step runs
EASGD's train op (its exchange the library's). Every process calls
`tf_contrib_easgd.reuse_freed_memory()` before TensorFlow loads, unless
--noreuse_freed_memory.
"""

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
import time
import types

if "--noreuse_freed_memory" not in sys.argv:
    from tf_contrib_easgd import reuse_freed_memory

    reuse_freed_memory()  # Before TensorFlow allocates anything.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import json  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from benchmarks import harness, models, specs  # noqa: E402
from benchmarks.protocol import reply, serve_commands  # noqa: E402
from tf_contrib_easgd import (  # noqa: E402
    CentreKeepingScaffold,
    CentreWaitingSessionCreator,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
)
from tf_contrib_easgd.custom_getter import partitions  # noqa: E402
from tf_contrib_easgd.trainer import finish  # noqa: E402
from tf_contrib_easgd.trainer.ledger import WorkLedger  # noqa: E402

flags.DEFINE_enum("role", "workers", ["ps", "workers"], "A parameter server or a host of workers.")
flags.DEFINE_integer("index", 0, "The parameter server's task index.")
flags.DEFINE_list("workers", [], "The worker task indices this host runs.")
flags.DEFINE_string("cluster", None, "ClusterSpec as JSON: {'ps': [...], 'worker': [...]}.")
flags.DEFINE_bool("reuse_freed_memory", True, "Call tf_contrib_easgd.reuse_freed_memory().")
FLAGS = flags.FLAGS

OPERATION_TIMEOUT_MS = 120_000  # A blocked session.run fails instead of hanging.
JITTER = 0.05  # A local step waits the compute time times a uniform draw in 1 +- JITTER.


def worker_graph(model, ps_tasks, wire, num_workers, index, container, trainer=False):
    """Worker `index`'s graph: `model`'s variables under EASGD, every weight matrix a
    partitioned variable with a shard per ps task (the centre spread evenly). The loss
    reads a row of each shard (the compute is the harness's wait); the exchange moves every
    value, on each run of the train op. With `trainer`, easgd-train's work ledger, sharded
    checkpoint saver, export saver and hook too."""
    device = f"/job:worker/task:{index}"
    g = types.SimpleNamespace(graph=tf.Graph())
    with g.graph.as_default(), tf.compat.v1.container(container):
        getter = ElasticAverageCustomGetter(device)
        setter = tf.compat.v1.train.replica_device_setter(ps_tasks=ps_tasks, worker_device=device)
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            loss = 0.0
            for name, shape in specs.MODELS[model].shapes().items():
                partitioner = (
                    tf.compat.v1.fixed_size_partitioner(ps_tasks) if len(shape) == 2 else None
                )
                variable = tf.compat.v1.get_variable(
                    name,
                    shape,
                    initializer=tf.compat.v1.zeros_initializer(),
                    partitioner=partitioner,
                )
                for part in partitions(variable):
                    loss += tf.reduce_sum(tf.gather(part, [0]))
            g.global_step = tf.compat.v1.train.get_or_create_global_step()
            g.optimizer = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.01),
                num_workers,
                getter,
                communication_period=1,
                rho=0.0,
                wire_dtype=wire,
            )
            g.train_op = g.optimizer.minimize(loss, global_step=g.global_step)
            if trainer:  # As easgd-train's graph.build_worker_graph makes them.
                g.hook = g.optimizer.make_session_run_hook(index == 0, index)
                g.ledger = WorkLedger(num_workers, index)
                g.saver = tf.compat.v1.train.Saver(
                    sharded=True, max_to_keep=3, save_relative_paths=True, name="checkpoint_saver"
                )
                g.export_saver = g.optimizer.swapping_saver(name="export_saver")
            g.worker_init = [
                tf.compat.v1.local_variables_initializer(),
                g.optimizer.get_init_op(index),
            ]
            g.chief_init = [tf.compat.v1.global_variables_initializer(), *g.worker_init]
    return g


def session_config(index, ps_tasks):
    """Worker `index` sees ps tasks 0..ps_tasks-1 and itself; exchanges called directly."""
    return tf.compat.v1.ConfigProto(
        device_filters=[
            *(f"/job:ps/task:{k}" for k in range(ps_tasks)),
            f"/job:worker/task:{index}",
        ],
        operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
        share_cluster_devices_in_session=True,
    )


def in_threads(function, indices):
    """Runs `function(index)` for each of `indices` in a thread of its own; waits."""
    threads = [threading.Thread(target=function, args=(i,), daemon=True) for i in indices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Host:
    """The worker tasks of one process: their servers, and the graphs being measured."""

    def __init__(self, cluster, indices):
        spec = tf.train.ClusterSpec(cluster)
        self.servers = {i: tf.distribute.Server(spec, "worker", i, start=True) for i in indices}
        self.built, self.jobs = {}, {}  # Task index -> (session, train_op); -> job graph.

    def _session(self, index, graph, ps_tasks):
        return tf.compat.v1.Session(
            self.servers[index].target, graph=graph, config=session_config(index, ps_tasks)
        )

    def build(self, model, ps_tasks, wire, num_workers, container, workers, chief=False):
        """Builds and starts `workers` (worker 0 with `chief` initialises the centre first)."""
        started, transports = time.monotonic(), []
        for index in workers:
            g = worker_graph(model, ps_tasks, wire, num_workers, index, container)
            session = self._session(index, g.graph, ps_tasks)
            for op in g.chief_init if chief and index == 0 else g.worker_init:
                session.run(op)
            transports.append(g.optimizer.choose_exchange_transport(session))
            session.run(g.train_op)  # The first exchange instantiates the functions on the ps.
            self.built[index] = (session, g.train_op)
        return {"transports": transports, "build_secs": time.monotonic() - started}

    def run(self, start_at, seconds, compute_secs, period, workers, seed=0):
        """Each of `workers` steps (a wait of `compute_secs` +- JITTER) and exchanges every
        `period`-th step, from a random phase; the steps ending in [start_at, start_at +
        seconds] count. Returns {"workers": [{"index", "steps", "exchanges", "elapsed",
        "latencies" (of the exchanges counted)}]}."""
        phases = np.random.default_rng(seed).integers(0, period, len(workers))
        waits = np.random.default_rng(seed + 1).uniform(
            1 - JITTER, 1 + JITTER, (len(workers), 4096)
        )
        answers, errors = [None] * len(workers), []

        def loop(slot):
            index = workers[slot]
            session, train_op = self.built[index]
            step, steps, last, latencies = int(phases[slot]), 0, start_at, []
            try:
                while True:
                    time.sleep(compute_secs * waits[slot, step % waits.shape[1]])
                    step, latency = step + 1, None
                    if step % period == 0:
                        before = time.perf_counter()
                        session.run(train_op)
                        latency = time.perf_counter() - before
                    now = time.time()
                    if now > start_at + seconds:
                        break
                    if now >= start_at:
                        steps, last = steps + 1, now
                        latencies += [] if latency is None else [latency]
            except Exception as error:  # Reported to the driver, which stops the harness.
                errors.append(f"worker {index}: {type(error).__name__}: {error}")
            answers[slot] = {
                "index": index,
                "steps": steps,
                "exchanges": len(latencies),
                "elapsed": last - start_at,
                "latencies": latencies,
            }

        in_threads(loop, range(len(workers)))
        if errors:
            raise RuntimeError("; ".join(errors[:3]))
        return {"workers": answers}

    def release(self, container=None):
        """Closes every session; with `container`, resets it on every task (once every host
        has closed its sessions)."""
        for session, _ in self.built.values():
            session.close()
        self.built = {}
        if container is not None:
            tf.compat.v1.Session.reset(next(iter(self.servers.values())).target, [container])
        return {}

    def calibrate(self, model, steps=40):
        """The median time of a real local step of `model` in a plain session here."""
        spec = specs.MODELS[model]
        images, labels = specs.synthetic_batch(spec)
        with tf.Graph().as_default() as graph:
            params = models.make_params(spec.as_json())
            loss = models.loss(spec.as_json(), params, tf.constant(images), tf.constant(labels))
            train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss)
            init = tf.compat.v1.global_variables_initializer()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(init)
            times = []
            for _ in range(steps + 5):
                before = time.perf_counter()
                session.run(train_op)
                times.append(time.perf_counter() - before)
        return {"compute_secs": float(np.median(times[5:]))}

    def job(
        self,
        model,
        ps_tasks,
        num_workers,
        container,
        workers,
        start_at=None,
        chief_delay=0.0,
        model_dir=None,
        exchanges=1,
    ):
        """A job's start and end as easgd-train runs them. Without `start_at`, builds each
        worker's graph (`trainer=True`); then at `start_at` each opens its
        `MonitoredSession` (the chief `chief_delay` late, with `CentreKeepingScaffold`; the
        others with `CentreWaitingSessionCreator`), takes `exchanges` exchanges, records
        them in the work ledger and ends as easgd-train's `finish` does.

        Returns:
            {"workers": [{"index", "ready", "finished", "done", and the chief's "saved_from",
            "saved", "exported_from", "exported", "ended"}]}: seconds from `start_at`.
        """
        if start_at is None:
            self.jobs = {
                i: worker_graph(model, ps_tasks, None, num_workers, i, container, True)
                for i in workers
            }
            return {}
        answers, errors = [], []
        timeout_secs = OPERATION_TIMEOUT_MS / 1000

        def one(index):
            g, chief, times = self.jobs[index], index == 0, {"index": index}

            def mark(name):
                times[name] = time.time() - start_at

            for name, phase in (("saver", "saved"), ("export_saver", "exported")):
                save = getattr(g, name).save

                def timed(*args, save=save, phase=phase, **kwargs):
                    mark(f"{phase}_from")
                    path = save(*args, **kwargs)
                    mark(phase)
                    return path

                getattr(g, name).save = timed
            end_job = g.ledger.end_job
            g.ledger.end_job = lambda session: (end_job(session), mark("ended"))[0]
            common = {
                "master": self.servers[index].target,
                "config": session_config(index, ps_tasks),
            }
            if chief:
                creator = tf.compat.v1.train.ChiefSessionCreator(
                    scaffold=CentreKeepingScaffold(saver=g.saver),
                    checkpoint_dir=model_dir,
                    **common,
                )
            else:
                creator = CentreWaitingSessionCreator(
                    scaffold=tf.compat.v1.train.Scaffold(saver=g.saver),
                    max_wait_secs=timeout_secs,
                    **common,
                )
            stand_in = types.SimpleNamespace(  # What finish.py reads of easgd-train's Worker.
                g=g,
                task=types.SimpleNamespace(num_workers=num_workers, task_index=index),
                config=types.SimpleNamespace(
                    timeout_secs=timeout_secs, steps=exchanges, model_dir=model_dir
                ),
                reporter=types.SimpleNamespace(event=lambda *a, **k: None),
                stall=types.SimpleNamespace(step=lambda *a, **k: contextlib.nullcontext()),
            )
            time.sleep(max(0.0, start_at + (chief_delay if chief else 0.0) - time.time()))
            try:
                with (
                    g.graph.as_default(),
                    tf.compat.v1.train.MonitoredSession(creator, hooks=[g.hook]) as session,
                ):
                    mark("ready")
                    for _ in range(exchanges):
                        session.run(g.train_op)
                    g.ledger.record(session, exchanges)
                    mark("finished")
                    state = types.SimpleNamespace(step=exchanges)
                    (finish.finish_as_chief if chief else finish.wait_for_end)(
                        session, stand_in, state
                    )
                    mark("done")
            except Exception as error:  # Reported to the driver, which stops the harness.
                errors.append(f"worker {index}: {type(error).__name__}: {error}")
            answers.append(times)

        in_threads(one, list(self.jobs))
        self.jobs = {}
        if errors:
            raise RuntimeError("; ".join(errors[:3]))
        return {"workers": answers}

    def ledger_load(self, num_workers, container, workers, start_at=None, seconds=0.0, poll=None):
        """easgd-train's work ledger under load. Without `start_at`, worker 0 initialises
        it. Else, in [start_at, start_at + seconds], each of `workers` writes its count back
        to back (`poll` None), reads the whole ledger every `finish.POLL_SECS` ("read"), or
        polls the end every `finish.waiting_poll_secs` ("end"). Returns {"calls",
        "latencies", "poll_secs"}."""
        poll_secs = {None: None, "read": finish.POLL_SECS}.get(poll)
        if poll == "end":
            poll_secs = finish.waiting_poll_secs(num_workers)
        sessions = {}
        for index in workers:
            with tf.Graph().as_default() as graph, tf.compat.v1.container(container):
                ledger = WorkLedger(num_workers, index)
                init = tf.compat.v1.global_variables_initializer()
            sessions[index] = (self._session(index, graph, 1), ledger)
        if start_at is None:
            sessions[0][0].run(init)
            sessions[0][0].close()
            return {}
        latencies = []

        def one(index):
            session, ledger = sessions[index]
            ledger.read(session) if poll == "read" else ledger.end_state(session)  # Warm.
            time.sleep(max(0.0, start_at - time.time()))
            count = 0
            while time.time() < start_at + seconds:
                before = time.perf_counter()
                if poll is None:
                    count += 1
                    ledger.record(session, count)
                else:
                    ledger.read(session) if poll == "read" else ledger.end_state(session)
                latencies.append(time.perf_counter() - before)
                time.sleep(poll_secs or 0.0)
            session.close()

        in_threads(one, workers)
        return {"calls": len(latencies), "latencies": latencies, "poll_secs": poll_secs}

    def checkpoint(self, model, ps_tasks, container, model_dir, repeats):
        """easgd-train's sharded checkpoint of the centre on `ps_tasks` ps tasks: worker 0
        saves and restores it `repeats` times (seconds of each)."""
        g = worker_graph(model, ps_tasks, None, 1, 0, container, trainer=True)
        session = self._session(0, g.graph, ps_tasks)
        for op in g.chief_init:
            session.run(op)
        saves, restores = [], []
        for _ in range(repeats):
            before = time.perf_counter()
            path = g.saver.save(
                session,
                os.path.join(model_dir, "model.ckpt"),
                global_step=g.global_step,
                write_meta_graph=False,
            )
            saves.append(time.perf_counter() - before)
            before = time.perf_counter()
            g.saver.restore(session, path)
            restores.append(time.perf_counter() - before)
        session.close()
        return {"save_secs": saves, "restore_secs": restores}

    def close(self):
        self.release()


class ParameterServer:
    """A ps task: its server serves; it answers the driver's questions about its memory."""

    def __init__(self, cluster, index):
        self.server = tf.distribute.Server(tf.train.ClusterSpec(cluster), "ps", index, start=True)

    @staticmethod
    def memory():
        """The resident set, then again once glibc returned the free memory it keeps
        (`malloc_trim`, which `reuse_freed_memory` holds back): held, and used."""
        resident = harness.rss_bytes(os.getpid())
        libc = ctypes.util.find_library("c")
        if libc:
            ctypes.CDLL(libc).malloc_trim(0)
        return {"rss": resident, "rss_used": harness.rss_bytes(os.getpid())}

    def close(self):
        pass


def main(argv):
    del argv  # Unused.
    tf.compat.v1.disable_v2_behavior()
    cluster = json.loads(FLAGS.cluster)
    if FLAGS.role == "ps":
        task = ParameterServer(cluster, FLAGS.index)
    else:
        task = Host(cluster, [int(index) for index in FLAGS.workers])
    reply({"ok": True, "ready": FLAGS.role})
    serve_commands(task, sys.stdin)
    if FLAGS.role == "ps":
        threading.Event().wait()  # A ps serves until the driver kills this process.


if __name__ == "__main__":
    app.run(main)
