"""One process of the scale harness (scale.py): a parameter server, or a host of workers.

    python -m benchmarks.common.scale_task --role=worker --index=0,4,8 --cluster=JSON

A host runs a server, graph and session per worker task, whose local step is a wait of the
calibrated compute time and every `period`-th step EASGD's train op (the library's
exchange); a ps answers models.py's `trim_memory`.
"""

import os
import threading
import time
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.common import graphs, models, protocol  # noqa: E402
from tf_contrib_easgd import (  # noqa: E402
    CentreKeepingScaffold,
    CentreWaitingSessionCreator,
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
    WorkLedger,
)
from tf_contrib_easgd.custom_getter import partitions  # noqa: E402
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange  # noqa: E402
from tf_contrib_easgd.job import ledger as work_ledger  # noqa: E402
from tf_contrib_easgd.job.ledger_variables import LedgerVariables  # noqa: E402
from tf_contrib_easgd.trainer import export  # noqa: E402

v1 = tf.compat.v1
TIMEOUT_MS = 120_000  # A blocked session.run fails instead of hanging.
JITTER = 0.05  # A local step waits the compute time times a uniform draw in 1 +- JITTER.


class _SerialCallsExchange(ElasticExchange):
    """The library's exchange with its calls to the ps tasks one after the other, as before
    they went in flight together (issue 38)."""

    _serial_calls = True


class _BeforeIssue38Exchange(_SerialCallsExchange):
    """The exchange before issue 38: its calls one after the other, and each direct call's
    replies sent after its task's updates, so that a link carried the values out, then the
    centres back (docs/DESIGN.md, "Both ways at once")."""

    def _task_half(self, group, inputs, device):
        half = super()._task_half(group, inputs, device)
        if device is None:  # A RemoteCall's function: its replies leave at its end anyway.
            return half
        with v1.device(device), tf.control_dependencies(half.updates):
            return half._replace(replies=[tf.identity(reply) for reply in half.replies])


#: The exchanges scale.py's `calls` measures, by form (`protocol.CALL_FORMS`).
EXCHANGES = {"at_once": ElasticExchange, "one_by_one": _SerialCallsExchange,
             "before_38": _BeforeIssue38Exchange}  # fmt: skip


def _optimizer(form):
    """The library's optimizer class, with the exchange of `form` (`EXCHANGES`)."""
    return type(f"Optimizer_{form}", (ElasticAverageOptimizer,),
                {"_exchange_class": EXCHANGES[form]})  # fmt: skip


def worker_graph(model, ps_tasks, wire, num_workers, index, container, trainer=False,
                 train_steps=1, form="at_once"):  # fmt: skip
    """Worker `index`'s graph: `model`'s variables under EASGD, every weight matrix a
    partitioned variable with a shard per ps task. The loss reads a row of each shard (the
    compute is the harness's wait); each run of the train op exchanges every value. With
    `trainer`, easgd-train's work ledger (of `train_steps` local steps), sharded checkpoint
    saver, export saver and hook; `form`: the exchange's (`EXCHANGES`): the library's, or
    one to measure it against."""
    device, g = f"/job:worker/task:{index}", types.SimpleNamespace(graph=tf.Graph())
    with g.graph.as_default(), v1.container(container):
        getter = ElasticAverageCustomGetter(device)
        setter = v1.train.replica_device_setter(ps_tasks=ps_tasks, worker_device=device)
        with v1.device(setter), v1.variable_scope("", custom_getter=getter):
            loss = 0.0
            for name, shape in protocol.MODELS[model].shapes().items():
                split = v1.fixed_size_partitioner(ps_tasks) if len(shape) == 2 else None
                variable = v1.get_variable(name, shape, initializer=v1.zeros_initializer(),
                                           partitioner=split)  # fmt: skip
                for part in partitions(variable):
                    loss += tf.reduce_sum(tf.gather(part, [0]))
            g.global_step = v1.train.get_or_create_global_step()
            optimizer = _optimizer(form)
            g.optimizer = optimizer(v1.train.GradientDescentOptimizer(0.01), num_workers, getter,
                                    communication_period=1, rho=0.0, wire_dtype=wire)  # fmt: skip
            g.train_op = g.optimizer.minimize(loss, global_step=g.global_step)
            if trainer:  # As easgd-train's graph.build_worker_graph makes them.
                g.hook = g.optimizer.make_session_run_hook(index == 0, index)
                # The ledger counts the tasks of the cluster; their addresses go unused.
                tasks = {"ps": [f"ps{i}:1" for i in range(ps_tasks)],
                         "worker": [f"worker{i}:1" for i in range(num_workers)]}  # fmt: skip
                g.ledger = WorkLedger(tasks, index == 0, index, train_steps, 1)
                g.saver = v1.train.Saver(sharded=True, max_to_keep=3, save_relative_paths=True,
                                         name="checkpoint_saver")  # fmt: skip
                g.export_saver = g.optimizer.swapping_saver(name="export_saver")
            g.worker_init = [v1.local_variables_initializer(), g.optimizer.get_init_op(index)]
            g.chief_init = [v1.global_variables_initializer(), *g.worker_init]
    return g


def session_config(index, ps_tasks):
    """Worker `index` sees ps tasks 0..ps_tasks-1 and itself; exchanges called directly."""
    filters = [*(f"/job:ps/task:{k}" for k in range(ps_tasks)), f"/job:worker/task:{index}"]
    return v1.ConfigProto(device_filters=filters, operation_timeout_in_ms=TIMEOUT_MS,
                          share_cluster_devices_in_session=True)  # fmt: skip


def in_threads(function, indices):
    """Runs `function(index)` for each of `indices` in a thread of its own; raises the
    first three errors of them together."""
    errors = []

    def guarded(index):
        try:
            function(index)
        except Exception as error:  # Reported to the driver, which stops the harness.
            errors.append(f"worker {index}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in indices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("; ".join(errors[:3]))


class Host:
    """The worker tasks of one process: their servers, and the graphs being measured."""

    def __init__(self, cluster, *indices):
        spec = tf.train.ClusterSpec(cluster)
        self.servers = {i: tf.distribute.Server(spec, "worker", i, start=True) for i in indices}
        self.built, self.jobs = {}, {}  # Task index -> (session, train_op); -> job graph.

    def _session(self, index, graph, ps_tasks):
        config = session_config(index, ps_tasks)
        return v1.Session(self.servers[index].target, graph=graph, config=config)

    def build(self, model, ps_tasks, wire, num_workers, container, workers, chief=False,
              form="at_once"):  # fmt: skip
        """Builds and starts `workers` (worker 0 with `chief` initialises the centre first);
        `form`: their exchange's (`EXCHANGES`)."""
        started, transports = time.monotonic(), []
        for index in workers:
            g = worker_graph(model, ps_tasks, wire, num_workers, index, container,
                             form=form)  # fmt: skip
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
        seconds] count. {"workers": [{"index", "steps", "exchanges", "elapsed",
        "latencies" (of the exchanges counted)}]}."""
        phases = np.random.default_rng(seed).integers(0, period, len(workers))
        waits = np.random.default_rng(seed + 1).uniform(
            1 - JITTER, 1 + JITTER, (len(workers), 4096)
        )
        answers = [None] * len(workers)

        def loop(slot):
            session, train_op = self.built[workers[slot]]
            step, steps, last, latencies = int(phases[slot]), 0, start_at, []
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
            answers[slot] = {"index": workers[slot], "steps": steps, "exchanges": len(latencies),
                             "elapsed": last - start_at, "latencies": latencies}  # fmt: skip

        in_threads(loop, range(len(workers)))
        return {"workers": answers}

    def release(self, container=None):
        """Closes every session; with `container`, resets it on every task (once every host
        has closed its sessions)."""
        for session, _ in self.built.values():
            session.close()
        self.built = {}
        if container is not None:
            v1.Session.reset(next(iter(self.servers.values())).target, [container])
        return {}

    def calibrate(self, model, steps=40):
        """The median time of a real local step of `model` in a plain session here."""
        built = graphs.plain("local", protocol.MODELS[model])
        with v1.Session(graph=built.graph) as session:
            session.run(built.chief_init)
            times = []
            for _ in range(steps + 5):
                before = time.perf_counter()
                session.run(built.train_op)
                times.append(time.perf_counter() - before)
        return {"compute_secs": float(np.median(times[5:]))}

    def job(self, model, ps_tasks, num_workers, container, workers, start_at=None,
            chief_delay=0.0, model_dir=None, exchanges=1):  # fmt: skip
        """A job's start and end as easgd-train runs them. Without `start_at`, builds each
        worker's graph; then at `start_at` each opens its `MonitoredSession` (the chief
        `chief_delay` late, with `CentreKeepingScaffold`; the others with
        `CentreWaitingSessionCreator`), takes `exchanges` exchanges, records them in the
        work ledger and ends as easgd-train does (the ledger's `finish`). {"workers":
        [{"index", "ready", "finished", "done", and the chief's "saved_from", "saved",
        "exported_from", "exported", "ended"}]}: seconds from `start_at`."""
        if start_at is None:
            self.jobs = {i: worker_graph(model, ps_tasks, None, num_workers, i, container, True,
                                         exchanges)
                         for i in workers}  # fmt: skip
            return {}
        answers, timeout_secs = [], TIMEOUT_MS / 1000

        def one(index):
            g, chief, times = self.jobs[index], index == 0, {"index": index}
            answers.append(times)

            def mark(name):
                times[name] = time.time() - start_at

            for saver, phase in ((g.saver, "saved"), (g.export_saver, "exported")):

                def timed(*args, save=saver.save, phase=phase, **kwargs):
                    mark(f"{phase}_from")
                    path = save(*args, **kwargs)
                    mark(phase)
                    return path

                saver.save = timed
            end_job = g.ledger.variables.end_job
            g.ledger.variables.end_job = lambda session: (end_job(session), mark("ended"))[0]
            common = {
                "master": self.servers[index].target,
                "config": session_config(index, ps_tasks),
            }
            if chief:
                scaffold = CentreKeepingScaffold(saver=g.saver)
                creator = v1.train.ChiefSessionCreator(scaffold, checkpoint_dir=model_dir, **common)
            else:
                scaffold = v1.train.Scaffold(saver=g.saver)
                creator = CentreWaitingSessionCreator(
                    scaffold, max_wait_secs=timeout_secs, **common
                )
            time.sleep(max(0.0, start_at + (chief_delay if chief else 0.0) - time.time()))
            with (
                g.graph.as_default(),
                v1.train.MonitoredSession(creator, hooks=[g.hook, g.ledger.hook]) as session,
            ):
                mark("ready")
                for _ in range(exchanges):
                    session.run(g.train_op)
                g.ledger.count(session, exchanges)
                mark("finished")

                def before_end(session=session, g=g):  # easgd-train's final save and export.
                    export.save_checkpoint(session, g, model_dir)
                    export.export_centre(session, g, model_dir)

                g.ledger.finish(session, timeout_secs, before_end=before_end if chief else None)
                mark("done")

        try:
            in_threads(one, list(self.jobs))
        finally:
            self.jobs = {}
        return {"workers": answers}

    def ledger_load(self, num_workers, container, workers, start_at=None, seconds=0.0, poll=None):
        """easgd-train's work ledger under load. Without `start_at`, worker 0 initialises
        it. Else, in [start_at, start_at + seconds], each of `workers` writes its count back
        to back (`poll` None), reads the whole ledger every `work_ledger.POLL_SECS` ("read"),
        or polls the end every `work_ledger.waiting_poll_secs` ("end"). {"calls", "latencies",
        "poll_secs"}."""
        poll_secs = {None: None, "read": work_ledger.POLL_SECS}.get(poll)
        if poll == "end":
            poll_secs = work_ledger.waiting_poll_secs(num_workers)
        sessions = {}
        for index in workers:
            with tf.Graph().as_default() as graph, v1.container(container):
                ledger = LedgerVariables(num_workers, index)
                init = v1.global_variables_initializer()
            sessions[index] = (self._session(index, graph, 1), ledger)
        if start_at is None:
            sessions[0][0].run(init)
            sessions[0][0].close()
            return {}
        latencies = []

        def one(index):
            session, ledger = sessions[index]
            call = ledger.read if poll == "read" else ledger.end_state
            call(session)  # Warm.
            time.sleep(max(0.0, start_at - time.time()))
            count = 0
            while time.time() < start_at + seconds:
                before, count = time.perf_counter(), count + 1
                if poll is None:
                    ledger.record(session, count)
                else:
                    call(session)
                latencies.append(time.perf_counter() - before)
                time.sleep(poll_secs or 0.0)
            session.close()

        in_threads(one, workers)
        return {"calls": len(latencies), "latencies": latencies, "poll_secs": poll_secs}

    def checkpoint(self, model, ps_tasks, container, model_dir, repeats):
        """easgd-train's sharded checkpoint of the centre on `ps_tasks` ps tasks: worker 0
        saves and restores it `repeats` times (seconds of each)."""
        g = worker_graph(model, ps_tasks, None, 1, 0, container, trainer=True)
        session, saves, restores = self._session(0, g.graph, ps_tasks), [], []
        for op in g.chief_init:
            session.run(op)
        for _ in range(repeats):
            before = time.perf_counter()
            path = g.saver.save(session, os.path.join(model_dir, "model.ckpt"),
                                global_step=g.global_step, write_meta_graph=False)  # fmt: skip
            saves.append(time.perf_counter() - before)
            before = time.perf_counter()
            g.saver.restore(session, path)
            restores.append(time.perf_counter() - before)
        session.close()
        return {"save_secs": saves, "restore_secs": restores}

    def close(self):
        self.release()


if __name__ == "__main__":
    models.serve(Host)
