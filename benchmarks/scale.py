"""The scale harness: where parameter servers saturate, 2 to 64 workers against 1, 2 and 4 ps.

    python -m benchmarks.scale              # make bench-scale (~20 min): OUT/scale.json,
                                            # OUT/scale.png, docs/SCALING.md's block
    python -m benchmarks.scale --quick      # a smoke run (~40 s) in a temporary folder
    python -m benchmarks.scale --rerender   # docs/SCALING.md again from OUT/scale.json

Every worker is a `tf.compat.v1.train.Server` task with its own graph and session, 16 to a
host process (`scale_cluster.py`, `scale_task.py`); its local step is a wait of the
calibrated compute time of the model's real step, and every tau-th step it exchanges with
the parameter servers through the library. For each ps count and wire, fresh ps processes
serve the workers added 2, 4, ... 64 at a time (their memory measured at each count), then
every (workers, tau, ps link rate) window runs, interleaved; the driver reads the
processes' CPU time (/proc) and the ps links' bytes at each window's edges. Then the
pieces of a 64-worker job that do not scale with the exchanges (`scale_pieces.py`).
docs/SCALING.md shows the results beside the cost model (`cost_model.py`).
"""

import json
import os
import pathlib
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import cost_model, scale_costs, scale_pieces, scale_report, specs
from benchmarks.cluster import wall_time_in
from benchmarks.provenance import ROOT, RunLog, run_record
from benchmarks.scale_cluster import (
    PS_CPUS,
    WORKER_CPUS,
    ScaleCluster,
    process_fds,
    process_rss_bytes,
)
from tf_contrib_easgd.trainer import network

flags.DEFINE_bool("quick", False, "Smoke run: 2 workers, 1 ps, tau 10, 1-2 s windows.")
flags.DEFINE_string("out", None, "Folder of scale.json and scale.png (default: "
                    "benchmarks/results, or a temporary folder with --quick).")  # fmt: skip
flags.DEFINE_string("report", None, "Markdown report whose generated block to write "
                    "(default: docs/SCALING.md, or OUT/SCALING.md with --quick).")  # fmt: skip
flags.DEFINE_integer("rounds", 1, "Rounds of every configuration (orders alternate).")
flags.DEFINE_float("compute_ms", None, "A worker's local step, ms (default: calibrated).")
flags.DEFINE_bool("rerender", False, "Only re-render the report from OUT/scale.json.")
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
QUICK = {
    "workers": (2,),
    "ps": (1,),
    "periods": (10,),
    "wires": (None,),
    "rates": (None, "1gbit"),
    "bf16_rates": (None, "1gbit"),
    "hosts": 1,
    "constants_models": (MODEL,),
}
CALL_TIMEOUT_SECS = 600.0
#: A window lasts long enough for about this many exchanges, within these bounds (s).
WINDOW_EXCHANGES, WINDOW_SECS, QUICK_WINDOW_SECS = 20, (2.0, 6.0), (1.0, 2.0)
WARM_SECS, MAX_WARM_SECS = 1.0, 4.0
#: The back-to-back exchanges of the constants pass, and its window.
CONSTANTS_SECS = 3.0


def window(cluster, workers, period, compute_secs, seconds, seed, warm_secs=WARM_SECS):
    """Runs the first `workers` workers for a window; returns its measurements.

    Returns:
        A dict: "exchanges" (completed in the window), "steps", "per_worker" (each worker's
        steps/s over its span), "latency" (median, p99, mean and count, seconds), CPU
        seconds of the ps tasks ("ps_cpu", one per task), of the hosts ("hosts_cpu") and
        of each CPU, everyone's ("cpus"), and bytes of each ps link ("ps_link"), all over
        the window.
    """
    start_at = wall_time_in(warm_secs)
    commands = {
        host: ("run", {
            "start_at": start_at, "seconds": seconds, "compute_secs": compute_secs,
            "period": period, "workers": cluster.host_workers(host, workers),
            "seed": seed * 100 + host,
        })
        for host in range(cluster.num_hosts)
        if cluster.host_workers(host, workers)
    }  # fmt: skip

    def edges():
        time.sleep(max(0.0, start_at - time.time()))
        before = cluster.counters()
        time.sleep(max(0.0, start_at + seconds - time.time()))
        return before, cluster.counters()

    answers, (before, after) = cluster.call_hosts(commands, CALL_TIMEOUT_SECS, edges)
    ran = [worker for answer in answers.values() for worker in answer["workers"]]
    latencies = sorted(latency for worker in ran for latency in worker["latencies"])
    return {
        "workers": workers,
        "period": period,
        "seconds": seconds,
        "exchanges": len(latencies),
        "steps": sum(worker["steps"] for worker in ran),
        "per_worker": [w["steps"] / w["elapsed"] if w["elapsed"] > 0 else 0.0 for w in ran],
        "latency": scale_costs.percentiles(latencies),
        "ps_cpu": [b - a for a, b in zip(before["ps_cpu"], after["ps_cpu"], strict=True)],
        "hosts_cpu": after["hosts_cpu"] - before["hosts_cpu"],
        "cpus": [b - a for a, b in zip(before["cpus"], after["cpus"], strict=True)],
        "ps_link": None
        if before["ps_link"] is None
        else [b - a for a, b in zip(before["ps_link"], after["ps_link"], strict=True)],
    }


def build(cluster, model, ps_tasks, wire, container, first, last, num_workers):
    """Builds and starts workers `first`..`last - 1` (worker 0 first: it is the chief)."""
    common = {"model": model, "ps_tasks": ps_tasks, "wire": wire, "container": container,
              "num_workers": num_workers}  # fmt: skip
    if first == 0:
        cluster.call(0, "build", CALL_TIMEOUT_SECS, workers=[0], chief=True, **common)
        first = 1
    commands = {}
    for host in range(cluster.num_hosts):
        mine = [w for w in cluster.host_workers(host, last) if w >= first]
        if mine:
            commands[host] = ("build", {"workers": mine, **common})
    answers, _ = cluster.call_hosts(commands, CALL_TIMEOUT_SECS)
    transports = {t for answer in answers.values() for t in answer["transports"]}
    if transports - {"direct"}:
        raise RuntimeError(f"exchange transports {transports}, expected direct calls")


def release(cluster, container):
    """Closes every worker's session, then frees `container` on every task."""
    cluster.call_hosts({h: ("release", {}) for h in range(cluster.num_hosts)}, 120)
    cluster.call(0, "release", 300, container=container)


def timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs):
    """(warm-up, window) seconds of a configuration: the window holds three of a worker's
    cycles (tau steps and an exchange) and about WINDOW_EXCHANGES exchanges, within
    bounds, as the cost model with the constants pass's costs (`rough`) predicts them;
    None when three cycles do not fit into the longest window (a slow link's many
    workers: then the model alone speaks)."""
    params = specs.MODELS[MODEL].num_params
    cluster = scale_costs.harness_cluster(workers, ps_tasks, rate)
    predicted = cost_model.predict(
        cluster, rough[wire], scale_costs.wire_bytes(params, wire), period, compute_secs
    )
    cycle = workers / predicted.exchanges_per_sec
    low, high = QUICK_WINDOW_SECS if quick else WINDOW_SECS
    if 3 * cycle > high:
        return None
    seconds = max(low, 3 * cycle, WINDOW_EXCHANGES / predicted.exchanges_per_sec)
    return min(max(cycle, WARM_SECS), MAX_WARM_SECS), min(high, seconds)


def measure_ps_count(cluster, plan, quick, ps_tasks, wire, round_index, compute_secs, rough, log):
    """Fresh ps tasks; the workers added in `plan` steps with the ps memory at each; then
    every (workers, period, rate) window, in forward order on even rounds and backward on
    odd ones. Returns the results of this ps count and wire."""
    cluster.start_ps()
    container = f"s{os.getpid()}r{round_index}p{ps_tasks}{wire or 'f32'}"
    memory = {0: cluster.ps_memory(ps_tasks)}
    built = 0
    for workers in plan["workers"]:
        build(cluster, MODEL, ps_tasks, wire, container, built, workers, max(plan["workers"]))
        built = workers
        memory[workers] = cluster.ps_memory(ps_tasks)
    held = ", ".join(
        f"W={w}: {sum(t['rss'] for t in m) / 1e6:.0f} ({sum(t['rss_used'] for t in m) / 1e6:.0f})"
        for w, m in memory.items()
    )
    log(f"  ps {ps_tasks} {wire or 'float32'}: {built} workers built; ps RSS (used), MB: {held}")
    combos = [
        (rate, workers, period)
        for rate in (plan["bf16_rates"] if wire else plan["rates"])
        for workers in plan["workers"]
        for period in plan["periods"]
    ]
    windows, skipped = [], []
    cluster.pin()
    for index, (rate, workers, period) in enumerate(
        combos if round_index % 2 == 0 else combos[::-1]
    ):
        if cluster.network is not None:
            cluster.set_ps_rate(rate)
        times = timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs)
        if times is None:
            skipped.append({"workers": workers, "period": period, "rate": rate})
            continue
        measured = window(cluster, workers, period, compute_secs, times[1], index, times[0])
        measured["rate"] = rate
        windows.append(measured)
        log("    " + scale_report.window_line(measured, ps_tasks, wire))
    if cluster.network is not None:
        cluster.set_ps_rate(None)
    local = None
    if round_index == 0 and ps_tasks == plan["ps"][0] and wire is None:
        # The ceiling: every worker's steps without an exchange (the waits alone).
        local = [window(cluster, w, 10**9, compute_secs, 2.0, seed=0) for w in plan["workers"]]
    after = cluster.ps_memory(ps_tasks)
    hosts_rss = [process_rss_bytes(pid) for pid in cluster.host_pids()]
    descriptors = {
        "ps": [process_fds(pid) for pid in cluster.ps_pids()[:ps_tasks]],
        "hosts": [process_fds(pid) for pid in cluster.host_pids()],
    }
    cluster.pin(False)
    release(cluster, container)
    cluster.stop_ps()
    return {
        "ps": ps_tasks,
        "wire": wire,
        "round": round_index,
        "memory": {str(w): m for w, m in memory.items()},
        "memory_after_windows": after,
        "fds": descriptors,
        "hosts_rss": hosts_rss,
        "windows": windows,
        "skipped": skipped,
        **({"local": local} if local else {}),
    }


def constants(cluster, plan, log):
    """Process CPU per exchange with nothing else running: one worker exchanging back to
    back with 1 ps task (and 4, for the cost of a call), each model and wire."""
    rows = []
    cluster.start_ps()
    for index, (model, ps_tasks, wire) in enumerate(
        (model, ps_tasks, wire)
        for model in plan["constants_models"]
        for ps_tasks in ((1, 4) if len(plan["ps"]) > 2 else (1,))
        for wire in plan["wires"]
    ):
        container = f"k{os.getpid()}x{index}"
        build(cluster, model, ps_tasks, wire, container, 0, 1, 1)
        cluster.pin()
        measured = window(cluster, 1, 1, 0.0, CONSTANTS_SECS, seed=0)
        cluster.pin(False)
        release(cluster, container)
        measured.update({"model": model, "ps": ps_tasks, "wire": wire})
        rows.append(measured)
        log("  constants " + scale_report.constants_line(measured))
    cluster.stop_ps()
    return rows


def untuned_constants(logs, netns, log):
    """The constants pass's exchange of MODEL at full width, 1 ps task, in processes that
    leave the C allocator as it is: BENCHMARKS.md's clusters do (its section 6)."""
    with ScaleCluster(1, 1, 1, logs / "untuned", netns, malloc=False) as cluster:
        cluster.start_ps()
        build(cluster, MODEL, 1, None, f"u{os.getpid()}", 0, 1, 1)
        cluster.pin()
        measured = window(cluster, 1, 1, 0.0, CONSTANTS_SECS, seed=0)
        measured.update({"model": MODEL, "ps": 1, "wire": None})
        log("  without reuse_freed_memory: " + scale_report.constants_line(measured))
        return measured


def main(argv):
    del argv  # Unused: run_record takes the whole command line.
    quick = FLAGS.quick
    default_out = pathlib.Path(tempfile.gettempdir()) / "easgd-bench-scale-quick"
    out = pathlib.Path(FLAGS.out or (default_out if quick else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    report = pathlib.Path(
        FLAGS.report or (out / "SCALING.md" if quick else ROOT / "docs" / "SCALING.md")
    )
    if FLAGS.rerender:
        scale_report.write(json.loads((out / "scale.json").read_text()), out, report)
        print(f"rendered {report} from {out / 'scale.json'}")
        return
    log = RunLog()
    plan = dict(QUICK if quick else FULL)
    reason = network.unavailable_reason(rate="1gbit")
    if reason:
        plan["rates"] = plan["bf16_rates"] = (None,)
    results = {
        **run_record("benchmarks.scale", sys.argv, quick),
        "model": MODEL,
        "plan": plan,
        "netns": reason is None,
        "netns_skip_reason": reason,
        "pinning": {"ps": PS_CPUS, "workers": WORKER_CPUS},
        "reuse_freed_memory": True,
    }
    log(f"load average {results['load_before']}; shaped links: {reason or 'yes'}")
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-scale-logs-"))
    workers = max(plan["workers"])
    with ScaleCluster(max(plan["ps"]), workers, plan["hosts"], logs, reason is None) as cluster:
        log(f"{workers} workers up in {plan['hosts']} host processes; logs {logs}")
        compute_secs = FLAGS.compute_ms / 1e3 if FLAGS.compute_ms else None
        if compute_secs is None:
            compute_secs = cluster.call(0, "calibrate", CALL_TIMEOUT_SECS, model=MODEL)[
                "compute_secs"
            ]
        results["compute_secs"] = compute_secs
        results["compute_calibrated"] = not FLAGS.compute_ms
        log(f"a local step of {MODEL}: {compute_secs * 1e3:.1f} ms")
        results["constants"] = constants(cluster, plan, log)
        rough = scale_costs.rough_costs(results["constants"], MODEL)
        results["ps_counts"] = []
        tuples = [(p, w) for p in plan["ps"] for w in plan["wires"]]
        for round_index in range(FLAGS.rounds):
            for ps_tasks, wire in tuples if round_index % 2 == 0 else tuples[::-1]:
                results["ps_counts"].append(
                    measure_ps_count(
                        cluster,
                        plan,
                        quick,
                        ps_tasks,
                        wire,
                        round_index,
                        compute_secs,
                        rough,
                        log,
                    )
                )
        results["pieces"] = scale_pieces.measure(cluster, MODEL, plan, log)
    if not quick:
        results["constants_untuned"] = untuned_constants(logs, reason is None, log)
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = time.time() - log.started
    (out / "scale.json").write_text(json.dumps(results, indent=1))
    (out / "scale.log").write_text("\n".join(log.lines) + "\n")
    scale_report.write(results, out, report)
    log(f"done in {results['duration_secs'] / 60:.1f} min: {report}, {out}/scale.json, scale.png")


if __name__ == "__main__":
    app.run(main)
