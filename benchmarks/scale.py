"""The scale harness of docs/SCALING.md: 2 to 64 workers against 1, 2 and 4 ps tasks.

    python -m benchmarks.scale              # make bench-scale (~20 min): OUT/scale.json,
                                            # scale.png, scale_windows.csv, the doc's block
    python -m benchmarks.scale --quick      # a smoke run (~40 s) in a temporary folder
    python -m benchmarks.scale --rerender   # docs/SCALING.md's block from OUT/scale.json

Workers are server tasks with their own graph and session, 16 to a host process
(scale_task.py), whose local step is a wait of the real step's calibrated time. For each ps
count and wire, fresh ps processes serve the workers added in steps (their memory measured
at each), then every (workers, tau, ps link rate) window runs, interleaved, the CPU time
(/proc) and link bytes read at its edges. Then what a 64-worker job needs besides
exchanges: start-up and end, the work ledger, checkpoints.
"""

import json
import os
import pathlib
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import cost_model, provenance, scale_report, specs
from benchmarks.harness import PS_CPUS, WORKER_CPUS, ScaleCluster, open_fds, rss_bytes, wall_time_in
from benchmarks.rounds import interleaved
from tf_contrib_easgd.trainer import network

provenance.define_flags("scale", "docs/SCALING.md")
flags.DEFINE_integer("rounds", 1, "Rounds of every configuration (orders alternate).")
flags.DEFINE_float("compute_ms", None, "A worker's local step, ms (default: calibrated).")
FLAGS = flags.FLAGS

MODEL = "mlp-2.9M"
FULL = {
    "workers": (2, 4, 8, 16, 32, 64),
    "ps": (1, 2, 4),
    "periods": (10, 64),
    "wires": (None, "bfloat16"),
    "rates": (None, "10gbit", "1gbit"),
    "bf16_rates": (None, "1gbit"),  # At 10 Gbit/s the CPU limits here, as unshaped.
    "hosts": 4,
    "constants_models": ("mlp-25K", MODEL),
}
QUICK = {"workers": (2,), "ps": (1,), "periods": (10,), "wires": (None,),
         "rates": (None, "1gbit"), "bf16_rates": (None, "1gbit"), "hosts": 1,
         "constants_models": (MODEL,)}  # fmt: skip
CALL_TIMEOUT_SECS = 600.0
#: A window lasts for about this many exchanges, within these bounds (s).
WINDOW_EXCHANGES, WINDOW_SECS, QUICK_WINDOW_SECS = 20, (2.0, 6.0), (1.0, 2.0)
WARM_SECS, MAX_WARM_SECS = 1.0, 4.0
CONSTANTS_SECS = 3.0  # The constants pass's window of back-to-back exchanges.
CHIEF_DELAY_SECS = 3.0  # How late the chief starts in `job`.
JOB_EXCHANGES, LEDGER_SECS, CHECKPOINT_REPEATS = 3, 6.0, 3


def _hosts(cluster, workers, command, **arguments):
    """{host: (command, arguments with the host's share of the first `workers`)}."""
    return {
        h: (command, {"workers": cluster.host_workers(h, workers), **arguments})
        for h in range(cluster.num_hosts)
        if cluster.host_workers(h, workers)
    }


def _edges(start_at, seconds, read):
    """A `meanwhile` that returns `read()` at the window's start and end."""

    def edges():
        time.sleep(max(0.0, start_at - time.time()))
        before = read()
        time.sleep(max(0.0, start_at + seconds - time.time()))
        return before, read()

    return edges


def _diff(before, after):
    return [b - a for a, b in zip(before, after, strict=True)]


def window(cluster, workers, period, compute_secs, seconds, seed, warm_secs=WARM_SECS):
    """Runs the first `workers` workers for a window: exchanges, steps, each worker's
    steps/s, latency percentiles, and the CPU seconds of the ps tasks, the hosts and each
    CPU and the bytes of each ps link over it."""
    start_at = wall_time_in(warm_secs)
    commands = {
        h: ("run", {**arguments, "seed": seed * 100 + h})
        for h, (_, arguments) in _hosts(
            cluster,
            workers,
            "run",
            start_at=start_at,
            seconds=seconds,
            compute_secs=compute_secs,
            period=period,
        ).items()
    }
    answers, (before, after) = cluster.call_hosts(
        commands, CALL_TIMEOUT_SECS, _edges(start_at, seconds, cluster.counters)
    )
    ran = [worker for answer in answers.values() for worker in answer["workers"]]
    latencies = sorted(latency for worker in ran for latency in worker["latencies"])
    return {
        "workers": workers,
        "period": period,
        "seconds": seconds,
        "exchanges": len(latencies),
        "steps": sum(w["steps"] for w in ran),
        "per_worker": [w["steps"] / w["elapsed"] if w["elapsed"] > 0 else 0.0 for w in ran],
        "latency": scale_report.percentiles(latencies),
        "ps_cpu": _diff(before["ps_cpu"], after["ps_cpu"]),
        "hosts_cpu": after["hosts_cpu"] - before["hosts_cpu"],
        "cpus": _diff(before["cpus"], after["cpus"]),
        "ps_link": None
        if before["ps_link"] is None
        else _diff(before["ps_link"], after["ps_link"]),
    }


def build(cluster, model, ps_tasks, wire, container, first, last, num_workers):
    """Builds and starts workers `first`..`last - 1` (worker 0 first: it is the chief)."""
    common = {
        "model": model,
        "ps_tasks": ps_tasks,
        "wire": wire,
        "container": container,
        "num_workers": num_workers,
    }
    if first == 0:
        cluster.call(0, "build", CALL_TIMEOUT_SECS, workers=[0], chief=True, **common)
    commands = {
        h: (
            "build",
            {"workers": [w for w in cluster.host_workers(h, last) if w >= max(first, 1)], **common},
        )
        for h in range(cluster.num_hosts)
    }
    answers, _ = cluster.call_hosts(
        {h: c for h, c in commands.items() if c[1]["workers"]}, CALL_TIMEOUT_SECS
    )
    transports = {t for answer in answers.values() for t in answer["transports"]}
    if transports - {"direct"}:
        raise RuntimeError(f"exchange transports {transports}, expected direct calls")


def release(cluster, container):
    """Closes every worker's session, then frees `container` on every task."""
    cluster.call_hosts({h: ("release", {}) for h in range(cluster.num_hosts)}, 120)
    cluster.call(0, "release", 300, container=container)


def timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs):
    """(warm-up, window) seconds: three of a worker's cycles and about WINDOW_EXCHANGES
    exchanges, within bounds, as the model with the constants' costs predicts; None when
    three cycles do not fit into the longest window (then the model alone speaks)."""
    predicted = cost_model.predict(
        scale_report.harness_cluster(workers, ps_tasks, rate),
        rough[wire],
        scale_report.wire_bytes(specs.MODELS[MODEL].num_params, wire),
        period,
        compute_secs,
    )
    cycle = workers / predicted.exchanges_per_sec
    low, high = QUICK_WINDOW_SECS if quick else WINDOW_SECS
    if 3 * cycle > high:
        return None
    seconds = max(low, 3 * cycle, WINDOW_EXCHANGES / predicted.exchanges_per_sec)
    return min(max(cycle, WARM_SECS), MAX_WARM_SECS), min(high, seconds)


def measure_ps_count(cluster, plan, quick, ps_tasks, wire, round_index, compute_secs, rough, log):
    """Fresh ps tasks; the workers added in steps with the ps memory at each; then every
    (rate, workers, period) window, interleaved. The results of this ps count and wire."""
    cluster.start_ps()
    container = f"s{os.getpid()}r{round_index}p{ps_tasks}{wire or 'f32'}"
    memory, built = {"0": cluster.ps_memory(ps_tasks)}, 0
    for workers in plan["workers"]:
        build(cluster, MODEL, ps_tasks, wire, container, built, workers, max(plan["workers"]))
        built, memory[str(workers)] = workers, cluster.ps_memory(ps_tasks)
    log(
        f"  ps {ps_tasks} {wire or 'float32'}: {built} workers built; ps RSS, MB: "
        + ", ".join(f"W={w}: {sum(t['rss'] for t in m) / 1e6:.0f}" for w, m in memory.items())
    )
    combos = tuple(
        (rate, workers, period)
        for rate in (plan["bf16_rates"] if wire else plan["rates"])
        for workers in plan["workers"]
        for period in plan["periods"]
    )
    windows, skipped = [], []
    cluster.pin()
    for index, (rate, workers, period) in enumerate(interleaved(combos, round_index)):
        if cluster.network is not None:
            cluster.set_ps_rate(rate)
        times = timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs)
        if times is None:
            skipped.append({"workers": workers, "period": period, "rate": rate})
            continue
        windows.append(
            {
                **window(cluster, workers, period, compute_secs, times[1], index, times[0]),
                "rate": rate,
            }
        )
        log("    " + scale_report.window_line(windows[-1]))
    if cluster.network is not None:
        cluster.set_ps_rate(None)
    result = {
        "ps": ps_tasks,
        "wire": wire,
        "round": round_index,
        "memory": memory,
        "memory_after_windows": cluster.ps_memory(ps_tasks),
        "windows": windows,
        "skipped": skipped,
        "hosts_rss": [rss_bytes(h.pid) for h in cluster.hosts],
        "fds": {
            "ps": [open_fds(cluster.ps[i].pid) for i in range(ps_tasks)],
            "hosts": [open_fds(h.pid) for h in cluster.hosts],
        },
    }
    if round_index == 0 and ps_tasks == plan["ps"][0] and wire is None:
        # The ceiling: every worker's steps without an exchange (the waits alone).
        result["local"] = [
            window(cluster, w, 10**9, compute_secs, 2.0, seed=0) for w in plan["workers"]
        ]
    cluster.pin(False)
    release(cluster, container)
    cluster.stop_ps()
    return result


def exchange_alone(cluster, model, ps_tasks, wire, container):
    """One worker exchanging back to back: the CPU of an exchange with nothing else."""
    build(cluster, model, ps_tasks, wire, container, 0, 1, 1)
    cluster.pin()
    measured = window(cluster, 1, 1, 0.0, CONSTANTS_SECS, seed=0)
    cluster.pin(False)
    return {**measured, "model": model, "ps": ps_tasks, "wire": wire}


def job(cluster, model, workers, ps_tasks, log):
    """Start-up and end of a `workers`-worker job as easgd-train runs it (`Host.job`), and
    the ps tasks' CPU while the others wait for the late chief."""
    container, model_dir = f"j{os.getpid()}w{workers}", tempfile.mkdtemp(prefix="easgd-scale-job-")
    common = {"model": model, "ps_tasks": ps_tasks, "num_workers": workers, "container": container}
    cluster.call_hosts(_hosts(cluster, workers, "job", **common), CALL_TIMEOUT_SECS)
    start_at = wall_time_in(2.0)

    def ps_cpu():
        return sum(cluster.counters()["ps_cpu"][:ps_tasks])

    timing = {"start_at": start_at, "chief_delay": CHIEF_DELAY_SECS, "model_dir": model_dir}
    commands = _hosts(cluster, workers, "job", exchanges=JOB_EXCHANGES, **timing, **common)
    waiting = _edges(start_at + 0.5, CHIEF_DELAY_SECS - 0.5, ps_cpu)
    answers, (before, after) = cluster.call_hosts(commands, CALL_TIMEOUT_SECS, waiting)
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    times = [t for answer in answers.values() for t in answer["workers"]]
    chief = next(t for t in times if t["index"] == 0)
    others, last = [t for t in times if t["index"] != 0], max(t["finished"] for t in times)
    m = {
        "workers": workers,
        "ps": ps_tasks,
        "chief": chief,
        "chief_ready": chief["ready"] - CHIEF_DELAY_SECS,  # Seconds from the chief's start.
        "others_ready": scale_report.percentiles([t["ready"] - CHIEF_DELAY_SECS for t in others]),
        "last_ready": max(t["ready"] for t in times) - CHIEF_DELAY_SECS,
        "waiting_ps_cores": (after - before) / (CHIEF_DELAY_SECS - 0.5),
        "wait_for_counts": chief["saved_from"] - last,
        "checkpoint": chief["saved"] - chief["saved_from"],
        "export": chief["exported"] - chief["exported_from"],
        "acknowledged": chief["done"] - chief["ended"],
        "end_of_job": chief["done"] - last,
        "others_done_after_end": scale_report.percentiles(
            [t["done"] - chief["ended"] for t in others]
        ),
    }
    log(
        f"  job of {workers} workers: the chief's session {m['chief_ready']:.2f} s, the last's "
        f"{m['last_ready']:.2f} s after its start; end of job {m['end_of_job']:.2f} s"
    )
    return m


def ledger(cluster, workers, poll, log):
    """The work ledger on ps 0 with `workers` writing it back to back (`poll` None) or
    polling it (`Host.ledger_load`): calls/s, latency, ps 0's CPU."""
    container = f"l{os.getpid()}w{workers}{poll or 'write'}"
    common = {"num_workers": workers, "container": container}
    cluster.call(0, "ledger_load", CALL_TIMEOUT_SECS, workers=[0], **common)
    start_at = wall_time_in(5.0)  # After every session and its first poll.
    window = {"start_at": start_at, "seconds": LEDGER_SECS, "poll": poll}
    commands = _hosts(cluster, workers, "ledger_load", **window, **common)
    edges = _edges(start_at, LEDGER_SECS, lambda: cluster.counters()["ps_cpu"][0])
    answers, (before, after) = cluster.call_hosts(commands, CALL_TIMEOUT_SECS, edges)
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    latencies = sorted(t for answer in answers.values() for t in answer["latencies"])
    m = {
        "workers": workers,
        "poll": poll,
        "poll_secs": next(iter(answers.values()))["poll_secs"],
        "calls_per_sec": len(latencies) / LEDGER_SECS,
        "latency": scale_report.percentiles(latencies),
        "ps0_cpu_per_call": (after - before) / max(len(latencies), 1),
        "ps0_cores": (after - before) / LEDGER_SECS,
    }
    log(f"  ledger, {workers} workers, {poll or 'write'}: {m['calls_per_sec']:.0f} calls/s")
    return m


def checkpoint(cluster, model, ps_tasks, log):
    """easgd-train's sharded checkpoint of the centre on `ps_tasks` ps tasks."""
    container = f"c{os.getpid()}p{ps_tasks}"
    answer = cluster.call(
        0,
        "checkpoint",
        CALL_TIMEOUT_SECS,
        model=model,
        ps_tasks=ps_tasks,
        container=container,
        model_dir=tempfile.mkdtemp(prefix="easgd-scale-ckpt-"),
        repeats=CHECKPOINT_REPEATS,
    )
    cluster.call(0, "release", CALL_TIMEOUT_SECS, container=container)
    m = {
        "ps": ps_tasks,
        "save": scale_report.percentiles(answer["save_secs"]),
        "restore": scale_report.percentiles(answer["restore_secs"]),
    }
    log(f"  checkpoint on {ps_tasks} ps: save {m['save']['median']:.3f} s")
    return m


def main(argv):
    del argv  # Unused: run_record takes the whole command line.
    quick = FLAGS.quick
    out, report = provenance.outputs("docs/SCALING.md")
    if FLAGS.rerender:
        scale_report.write(json.loads((out / "scale.json").read_text()), out, report)
        return
    log, plan = provenance.RunLog(), dict(QUICK if quick else FULL)
    reason = network.unavailable_reason(rate="1gbit")
    if reason:
        plan["rates"] = plan["bf16_rates"] = (None,)
    results = {
        **provenance.run_record("benchmarks.scale", sys.argv, quick),
        "model": MODEL,
        "plan": plan,
        "netns": reason is None,
        "netns_skip_reason": reason,
        "pinning": {"ps": PS_CPUS, "workers": WORKER_CPUS},
        "reuse_freed_memory": True,
    }
    log(f"load average {results['load_before']}; shaped links: {reason or 'yes'}")
    logs, most = (
        pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-scale-logs-")),
        max(plan["workers"]),
    )
    with ScaleCluster(max(plan["ps"]), most, plan["hosts"], logs, reason is None) as cluster:
        log(f"{most} workers up in {plan['hosts']} host processes; logs {logs}")
        compute_secs = FLAGS.compute_ms / 1e3 if FLAGS.compute_ms else None
        if compute_secs is None:
            compute_secs = cluster.call(0, "calibrate", CALL_TIMEOUT_SECS, model=MODEL)[
                "compute_secs"
            ]
        results.update(
            compute_secs=compute_secs, compute_calibrated=not FLAGS.compute_ms, constants=[]
        )
        log(f"a local step of {MODEL}: {compute_secs * 1e3:.1f} ms")
        cluster.start_ps()
        for index, (model, ps_tasks, wire) in enumerate(
            (m, p, w)
            for m in plan["constants_models"]
            for p in ((1, 4) if len(plan["ps"]) > 2 else (1,))
            for w in plan["wires"]
        ):
            results["constants"].append(
                exchange_alone(cluster, model, ps_tasks, wire, f"k{os.getpid()}x{index}")
            )
            release(cluster, f"k{os.getpid()}x{index}")
            log("  constants " + scale_report.window_line(results["constants"][-1]))
        cluster.stop_ps()
        rough = scale_report.rough_costs(results["constants"], MODEL)
        pairs, results["ps_counts"] = tuple((p, w) for p in plan["ps"] for w in plan["wires"]), []
        for round_index in range(FLAGS.rounds):
            for ps_tasks, wire in interleaved(pairs, round_index):
                results["ps_counts"].append(
                    measure_ps_count(
                        cluster, plan, quick, ps_tasks, wire, round_index, compute_secs, rough, log
                    )
                )
        cluster.start_ps()
        results["pieces"] = {
            "checkpoint": [checkpoint(cluster, MODEL, p, log) for p in plan["ps"]],
            "ledger": [ledger(cluster, most, poll, log) for poll in (None, "read", "end")],
            "job": [job(cluster, MODEL, w, max(plan["ps"]), log) for w in sorted({2, most})],
            "chief_delay_secs": CHIEF_DELAY_SECS,
        }
        cluster.stop_ps()
    if not quick:  # In processes that leave the C allocator as it is, as BENCHMARKS.md's do.
        with ScaleCluster(1, 1, 1, logs / "untuned", reason is None, malloc=False) as cluster:
            cluster.start_ps()
            results["constants_untuned"] = exchange_alone(
                cluster, MODEL, 1, None, f"u{os.getpid()}"
            )
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = time.time() - log.started
    provenance.save(results, log, out / "scale.json")
    scale_report.write(results, out, report)
    log(f"done in {results['duration_secs'] / 60:.1f} min: {report}, {out}/scale.json, scale.png")


if __name__ == "__main__":
    app.run(main)
