"""One process of the scale harness (`scale.py`): a parameter server, or a host of workers.

    python -m benchmarks.scale_task --role=ps --index=0 --cluster=JSON
    python -m benchmarks.scale_task --role=workers --workers=0,4,8 --cluster=JSON

A host runs one `tf.compat.v1.train.Server` per worker task it holds, each worker with its
own graph and session, as between-graph replication has them; it answers `scale.py`'s
commands on stdin (task_protocol.py). A worker's local step is a wait of the calibrated
compute time; every `period`-th step it runs EASGD's train op, whose exchange with the
parameter servers is the library's (docs/SCALING.md says why the wait stands for compute).
Every process calls `tf_contrib_easgd.reuse_freed_memory()` before TensorFlow loads,
unless given --noreuse_freed_memory.
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

from benchmarks import models, scale_cluster, specs  # noqa: E402
from benchmarks.scale_graph import (  # noqa: E402
    OPERATION_TIMEOUT_MS,
    session_config,
    worker_graph,
)
from benchmarks.task_protocol import reply, serve_commands  # noqa: E402
from tf_contrib_easgd import CentreKeepingScaffold, CentreWaitingSessionCreator  # noqa: E402
from tf_contrib_easgd.trainer import finish  # noqa: E402
from tf_contrib_easgd.trainer.ledger import WorkLedger  # noqa: E402

flags.DEFINE_enum("role", "workers", ["ps", "workers"], "A parameter server or a host of workers.")
flags.DEFINE_integer("index", 0, "The parameter server's task index.")
flags.DEFINE_list("workers", [], "The worker task indices this host runs.")
flags.DEFINE_string("cluster", None, "ClusterSpec as JSON: {'ps': [...], 'worker': [...]}.")
flags.DEFINE_bool("reuse_freed_memory", True, "Call tf_contrib_easgd.reuse_freed_memory().")
FLAGS = flags.FLAGS

#: A local step waits the compute time times a uniform draw in 1 +- JITTER.
JITTER = 0.05


class Host:
    """The worker tasks of one process: their servers, and the graphs being measured."""

    def __init__(self, cluster, indices):
        self.cluster = cluster
        spec = tf.train.ClusterSpec(cluster)
        self.servers = {i: tf.distribute.Server(spec, "worker", i, start=True) for i in indices}
        self.built = {}  # Task index -> (session, train_op).
        self.jobs = {}  # Task index -> its graph for `job`.

    def build(self, model, ps_tasks, wire, num_workers, container, workers, chief=False):
        """Builds and starts `workers` (task indices of this host); worker 0 with `chief`
        first initialises the centre. Returns each one's exchange transport and the time."""
        started = time.monotonic()
        transports = []
        for index in workers:
            g = worker_graph(model, ps_tasks, wire, num_workers, index, container)
            session = tf.compat.v1.Session(
                self.servers[index].target, graph=g.graph, config=session_config(index, ps_tasks)
            )
            for op in g.chief_init if chief and index == 0 else g.worker_init:
                session.run(op)
            transports.append(g.optimizer.choose_exchange_transport(session))
            session.run(g.train_op)  # The first exchange instantiates the functions on the ps.
            self.built[index] = (session, g.train_op)
        return {"transports": transports, "build_secs": time.monotonic() - started}

    def run(self, start_at, seconds, compute_secs, period, workers, seed=0):
        """Each of `workers` takes local steps (a wait of `compute_secs`, +- JITTER) and
        exchanges every `period`-th, from now on; the steps that end in `[start_at,
        start_at + seconds]` are counted. Each worker starts at a random phase of its
        period (workers that started apart), so that their exchanges do not all fall on
        the same instant.

        Returns:
            {"workers": [{"index", "steps", "exchanges", "elapsed", "latencies"}]}: the
            latencies are those of the exchange steps counted, in seconds.
        """
        phases = np.random.default_rng(seed).integers(0, period, len(workers))
        # Real steps vary a little; identical waits would keep the workers in lock step.
        waits = np.random.default_rng(seed + 1).uniform(
            1 - JITTER, 1 + JITTER, (len(workers), 4096)
        )
        answers = [None] * len(workers)
        errors = []

        def loop(slot, index):
            session, train_op = self.built[index]
            end = start_at + seconds
            step, steps, last, latencies = int(phases[slot]), 0, start_at, []
            try:
                while True:
                    time.sleep(compute_secs * waits[slot, step % waits.shape[1]])
                    step += 1
                    latency = None
                    if step % period == 0:
                        before = time.perf_counter()
                        session.run(train_op)
                        latency = time.perf_counter() - before
                    now = time.time()
                    if now > end:
                        break
                    if now >= start_at:
                        steps, last = steps + 1, now
                        if latency is not None:
                            latencies.append(latency)
            except Exception as error:  # Reported to the driver, which stops the harness.
                errors.append(f"worker {index}: {type(error).__name__}: {error}")
            answers[slot] = {
                "index": index,
                "steps": steps,
                "exchanges": len(latencies),
                "elapsed": last - start_at,
                "latencies": latencies,
            }

        self._in_threads(lambda slot: loop(slot, workers[slot]), range(len(workers)))
        if errors:
            raise RuntimeError("; ".join(errors[:3]))
        return {"workers": answers}

    def release(self, container=None):
        """Closes every session; with `container`, then resets it on every task of the
        cluster (once, on one host, after every host has closed its sessions: a reset
        reaches every task whatever the device filters, so every task must be up)."""
        for session, _ in self.built.values():
            session.close()
        self.built = {}
        if container is not None:
            tf.compat.v1.Session.reset(next(iter(self.servers.values())).target, [container])
        return {}

    def calibrate(self, model, steps=40):
        """The median time of a real local step of `model` (forward, backward, SGD on its
        synthetic batch) in a plain session of this process: the wait that stands for it."""
        spec = specs.MODELS[model]
        images, labels = specs.synthetic_batch(spec)
        graph = tf.Graph()
        with graph.as_default():
            params = models.make_params(spec)
            loss = models.loss(spec, params, tf.constant(images), tf.constant(labels))
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

    def job(self, model, ps_tasks, num_workers, container, workers, start_at=None,
            chief_delay=0.0, model_dir=None, exchanges=1):  # fmt: skip
        """A job's start and end as easgd-train runs them, for `workers` of this host.

        Called first without `start_at`, it builds each worker's graph with easgd-train's
        pieces (`worker_graph(trainer=True)`). Then, at `start_at`, each worker opens its
        `MonitoredSession` as easgd-train does (the chief `chief_delay` late, with a
        `CentreKeepingScaffold`; the others with the library's
        `CentreWaitingSessionCreator`), takes `exchanges` exchanges, writes its count into
        the work ledger and ends with easgd-train's `finish.finish_as_chief` or
        `finish.wait_for_end`.

        Returns:
            {"workers": [{"index", "ready", "finished", "done", and the chief's
            "saved_from", "saved", "exported_from", "exported", "ended"}]}: seconds from
            `start_at`.
        """
        if start_at is None:
            self.jobs = {
                i: worker_graph(model, ps_tasks, None, num_workers, i, container, True)
                for i in workers
            }
            return {}
        answers, errors = [], []

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

                getattr(g, name).save = timed  # This saver's own save, timed.
            end_job = g.ledger.end_job
            g.ledger.end_job = lambda session: (end_job(session), mark("ended"))[0]
            timeout_secs = OPERATION_TIMEOUT_MS / 1000
            common = {"master": self.servers[index].target,
                      "config": session_config(index, ps_tasks)}  # fmt: skip
            if chief:
                creator = tf.compat.v1.train.ChiefSessionCreator(
                    scaffold=CentreKeepingScaffold(saver=g.saver), checkpoint_dir=model_dir,
                    **common,
                )  # fmt: skip
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
                    if chief:
                        finish.finish_as_chief(session, stand_in, state)
                    else:
                        finish.wait_for_end(session, stand_in, state)
                    mark("done")
            except Exception as error:  # Reported to the driver, which stops the harness.
                errors.append(f"worker {index}: {type(error).__name__}: {error}")
            answers.append(times)

        self._in_threads(one, list(self.jobs))
        self.jobs = {}
        if errors:
            raise RuntimeError("; ".join(errors[:3]))
        return {"workers": answers}

    def ledger_load(self, num_workers, container, workers, start_at=None, seconds=0.0,
                    poll=None):  # fmt: skip
        """easgd-train's work ledger under load, on `workers`. Without `start_at`, worker 0
        alone initialises the ledger. Else, during `[start_at, start_at + seconds]`, each
        writes its count back to back (`poll` None: as at each exchange, unthrottled), or
        polls: the whole ledger every `finish.POLL_SECS` ("read", a finished worker before
        issue 30, and the chief now), or the end of the job every
        `finish.waiting_poll_secs(num_workers)` ("end", a finished worker now).

        Returns:
            {"calls": calls completed in the window, "latencies": their seconds,
            "poll_secs"}.
        """
        poll_secs = {None: None, "read": finish.POLL_SECS}.get(poll)
        if poll == "end":
            poll_secs = finish.waiting_poll_secs(num_workers)
        sessions = {}
        for index in workers:
            graph = tf.Graph()
            with graph.as_default(), tf.compat.v1.container(container):
                ledger = WorkLedger(num_workers, index)
                init = tf.compat.v1.global_variables_initializer()
            sessions[index] = (
                tf.compat.v1.Session(
                    self.servers[index].target, graph=graph, config=session_config(index, 1)
                ),
                ledger,
            )
        if start_at is None:
            session = sessions[0][0]
            session.run(init)
            session.close()
            return {}
        latencies = []

        def one(index):
            session, ledger = sessions[index]
            ledger.read(session) if poll == "read" else ledger.end_state(session)  # Warm.
            time.sleep(max(0.0, start_at - time.time()))
            steps = 0
            while time.time() < start_at + seconds:
                before = time.perf_counter()
                if poll is None:
                    steps += 1
                    ledger.record(session, steps)
                else:
                    ledger.read(session) if poll == "read" else ledger.end_state(session)
                latencies.append(time.perf_counter() - before)
                time.sleep(poll_secs or 0.0)
            session.close()

        self._in_threads(one, workers)
        return {"calls": len(latencies), "latencies": latencies, "poll_secs": poll_secs}

    @staticmethod
    def _in_threads(function, indices):
        """Runs `function(index)` for each of `indices` in a thread of its own; waits."""
        threads = [threading.Thread(target=function, args=(i,), daemon=True) for i in indices]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def checkpoint(self, model, ps_tasks, container, model_dir, repeats):
        """easgd-train's sharded checkpoint of the centre held by `ps_tasks` ps tasks: worker
        0 alone saves it and restores it `repeats` times (seconds of each)."""
        g = worker_graph(model, ps_tasks, None, 1, 0, container, trainer=True)
        session = tf.compat.v1.Session(
            self.servers[0].target, graph=g.graph, config=session_config(0, ps_tasks)
        )
        for op in g.chief_init:
            session.run(op)
        saves, restores = [], []
        prefix = os.path.join(model_dir, "model.ckpt")
        for _ in range(repeats):
            before = time.perf_counter()
            path = g.saver.save(session, prefix, global_step=g.global_step, write_meta_graph=False)
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
        spec = tf.train.ClusterSpec(cluster)
        self.server = tf.distribute.Server(spec, job_name="ps", task_index=index, start=True)

    @staticmethod
    def memory():
        """The resident set in bytes, then again once the C allocator has returned the free
        memory it keeps (glibc's `malloc_trim`, which `reuse_freed_memory` holds back): what
        the process holds, and what it uses."""
        resident = scale_cluster.process_rss_bytes(os.getpid())
        libc = ctypes.util.find_library("c")
        if libc:
            ctypes.CDLL(libc).malloc_trim(0)
        return {"rss": resident, "rss_used": scale_cluster.process_rss_bytes(os.getpid())}

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
    serve_commands(task, sys.stdin, reply)
    if FLAGS.role == "ps":
        threading.Event().wait()  # A ps serves until the driver kills this process.


if __name__ == "__main__":
    app.run(main)
