"""The scale harness of docs/SCALING.md: 2 to 64 workers against 1, 2 and 4 ps tasks.

    python -m benchmarks.scale              # make bench-scale (~35 min): OUT/scale.json,
                                            # scale.png, scale_windows.csv, the doc's block
    python -m benchmarks.scale --quick      # a smoke run (~2 min) in a temporary folder
    python -m benchmarks.scale --rerender   # docs/SCALING.md's block from OUT/scale.json

Workers are server tasks, 16 to a host process (common/scale_task.py), whose local step waits the
real step's calibrated time. For each ps count and wire, fresh ps processes serve the
workers added in steps (their memory measured at each), then every (workers, tau, link
rate) window runs, interleaved, CPU time and link bytes read at its edges. Then what a
64-worker job needs besides exchanges: start-up and end, the work ledger, checkpoints. Last,
in a cluster of its own (one worker), one exchange alone is timed with its calls to 2 and 4
ps tasks all at once and, in the same run, one after the other (the exchange before issue
38).
"""

import os
import pathlib
import tempfile
import time

from absl import app

from benchmarks import scale_report, scale_windows
from benchmarks.common import cost_model, network, protocol, report
from benchmarks.common.harness import (
    PS_CPUS,
    WORKER_CPUS,
    ScaleCluster,
    interleaved,
    open_fds,
    rss_bytes,
    wall_time_in,
)
from benchmarks.scale_windows import percentiles

report.define_flags("scale", "docs/SCALING.md")
MODEL = "mlp-2.9M"
FULL = {"workers": (2, 4, 8, 16, 32, 64), "ps": (1, 2, 4), "periods": (10, 64),
        "wires": (None, "bfloat16"), "rates": (None, "10gbit", "1gbit"),
        "bf16_rates": (None, "1gbit"),  # At 10 Gbit/s the CPU limits here, as unshaped.
        "hosts": 4, "constants_models": ("mlp-25K", MODEL),
        "calls_ps": (2, 4), "calls_rates": (None, "1gbit"), "calls_rounds": 2}  # fmt: skip
QUICK = {"workers": (2,), "ps": (1,), "periods": (10,), "wires": (None,),
         "rates": (None, "1gbit"), "bf16_rates": (None, "1gbit"), "hosts": 1,
         "constants_models": (MODEL,), "calls_ps": (2,), "calls_rates": ("1gbit",),
         "calls_rounds": 1}  # fmt: skip
#: A window lasts for about this many exchanges, within these bounds (s).
WINDOW_EXCHANGES, WINDOW_SECS, QUICK_WINDOW_SECS = 20, (2.0, 6.0), (1.0, 2.0)
WARM_SECS, MAX_WARM_SECS = 1.0, 4.0
CONSTANTS_SECS = 3.0  # The constants pass's window of back-to-back exchanges.
#: Before its windows, a pass runs every worker unmeasured this long (--quick: the second):
#: the ps heaps grow to what many exchanges in flight hold. Without it the first windows
#: paid for that memory (ps CPU per exchange up to 2x, the same window run again 1.8-2x
#: faster at the end of the pass, 418c666).
SETTLE_SECS = (8.0, 1.0)
CHIEF_DELAY_SECS = 3.0  # How late the chief starts in `job`.
JOB_EXCHANGES, CHECKPOINT_REPEATS = 3, 3
#: A ledger window's length (--quick: the second), long enough for ~10 reads at 0.2 s.
LEDGER_SECS = (6.0, 2.0)


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
    return None if before is None else [b - a for a, b in zip(before, after, strict=True)]


def window(cluster, workers, period, compute_secs, seconds, seed, warm_secs=WARM_SECS):
    """Runs the first `workers` workers for a window: exchanges, steps, each worker's
    steps/s, latency percentiles, and the CPU seconds of the ps tasks, the hosts and each
    CPU and the bytes of each ps link over it."""
    start_at = wall_time_in(warm_secs)
    commands = _hosts(cluster, workers, "run", start_at=start_at, seconds=seconds,
                      compute_secs=compute_secs, period=period)  # fmt: skip
    for host, (_, arguments) in commands.items():
        arguments["seed"] = seed * 100 + host
    meanwhile = _edges(start_at, seconds, cluster.counters)
    answers, (before, after) = cluster.call_hosts(commands, meanwhile)
    ran = [worker for answer in answers.values() for worker in answer["workers"]]
    latencies = sorted(latency for worker in ran for latency in worker["latencies"])
    return {
        "workers": workers, "period": period, "seconds": seconds, "exchanges": len(latencies),
        "steps": sum(w["steps"] for w in ran),
        "per_worker": [w["steps"] / w["elapsed"] if w["elapsed"] > 0 else 0.0 for w in ran],
        "latency": percentiles(latencies),
        "ps_cpu": _diff(before["ps_cpu"], after["ps_cpu"]),
        "hosts_cpu": after["hosts_cpu"] - before["hosts_cpu"],
        "cpus": _diff(before["cpus"], after["cpus"]),
        "ps_link": _diff(before["ps_link"], after["ps_link"]),
    }  # fmt: skip


def build(cluster, model, ps_tasks, wire, container, first, last, num_workers,
          form="at_once"):  # fmt: skip
    """Builds and starts workers `first`..`last - 1` (worker 0 first: it is the chief);
    `form`: their exchange's (`protocol.CALL_FORMS`)."""
    common = {"model": model, "ps_tasks": ps_tasks, "wire": wire, "container": container,
              "num_workers": num_workers, "form": form}  # fmt: skip
    if first == 0:
        cluster.call(0, "build", workers=[0], chief=True, **common)
    commands = {}
    for host in range(cluster.num_hosts):
        workers = [w for w in cluster.host_workers(host, last) if w >= max(first, 1)]
        if workers:
            commands[host] = ("build", {"workers": workers, **common})
    answers, _ = cluster.call_hosts(commands)
    transports = {t for answer in answers.values() for t in answer["transports"]}
    if transports - {"direct"}:
        raise RuntimeError(f"exchange transports {transports}, expected direct calls")


def release(cluster, container):
    """Closes every worker's session, then frees `container` on every task."""
    cluster.call_hosts({h: ("release", {}) for h in range(cluster.num_hosts)})
    cluster.call(0, "release", container=container)


def timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs):
    """(warm-up, window) seconds: three of a worker's cycles and about WINDOW_EXCHANGES
    exchanges, within bounds, as the model with the constants' costs predicts; None when
    three cycles do not fit into the longest window (then the model alone speaks)."""
    cluster = scale_report.harness_cluster(workers, ps_tasks, rate)
    size = scale_windows.wire_bytes(protocol.MODELS[MODEL].num_params, wire)
    predicted = cost_model.predict(cluster, rough[wire], size, period, compute_secs)
    cycle = workers / predicted.exchanges_per_sec
    low, high = QUICK_WINDOW_SECS if quick else WINDOW_SECS
    if 3 * cycle > high:
        return None
    seconds = max(low, 3 * cycle, WINDOW_EXCHANGES / predicted.exchanges_per_sec)
    return min(max(cycle, WARM_SECS), MAX_WARM_SECS), min(high, seconds)


def measure_ps_count(cluster, plan, quick, ps_tasks, wire, compute_secs, rough, log):
    """Fresh ps tasks; the workers added in steps with the ps memory at each; then every
    (rate, workers, period) window, interleaved. The results of this ps count and wire."""
    cluster.start_ps()
    container = f"s{os.getpid()}p{ps_tasks}{wire or 'f32'}"
    memory, built = {"0": cluster.ps_memory(ps_tasks)}, 0
    for workers in plan["workers"]:
        build(cluster, MODEL, ps_tasks, wire, container, built, workers, max(plan["workers"]))
        built, memory[str(workers)] = workers, cluster.ps_memory(ps_tasks)
    rss = ", ".join(f"W={w}: {sum(t['rss'] for t in m) / 1e6:.0f}" for w, m in memory.items())
    log(f"  ps {ps_tasks} {wire or 'float32'}: {built} workers built; ps RSS, MB: {rss}")
    rates, windows, skipped = plan["bf16_rates"] if wire else plan["rates"], [], []
    combos = [(r, w, p) for r in rates for w in plan["workers"] for p in plan["periods"]]
    cluster.pin()
    settle, longest = SETTLE_SECS[quick], (QUICK_WINDOW_SECS if quick else WINDOW_SECS)[1]
    window(cluster, max(plan["workers"]), plan["periods"][0], compute_secs, settle, 10**6, 1.0)
    for index, (rate, workers, period) in enumerate(combos):
        if cluster.network is not None:
            cluster.set_ps_rate(rate)
        times = timing(rough, quick, workers, ps_tasks, wire, period, rate, compute_secs)
        if times is None:
            skipped.append({"workers": workers, "period": period, "rate": rate})
            continue
        measured = window(cluster, workers, period, compute_secs, times[1], index, times[0])
        longer = scale_windows.again(measured, longest, (WARM_SECS, MAX_WARM_SECS))
        if longer is not None:
            log("    too short: " + scale_windows.window_line({**measured, "rate": rate}))
            first = {"seconds": measured["seconds"], "exchanges": measured["exchanges"]}
            measured = window(cluster, workers, period, compute_secs, longer[1],
                              len(combos) * 2 + index, longer[0])  # fmt: skip
            measured["lengthened_from"], times = first, longer
        windows.append({**measured, "rate": rate, "warm": times[0]})
        log("    " + scale_windows.window_line(windows[-1]))
    repeats = []
    if (ps_tasks, wire) == (max(plan["ps"]), None):  # How much a window varies.
        for first, m in enumerate(windows):
            most = sorted({w["workers"] for w in windows if w["rate"] == m["rate"]})[-2:]
            if m["period"] == plan["periods"][0] and m["workers"] in most:
                if cluster.network is not None:
                    cluster.set_ps_rate(m["rate"])
                again = window(cluster, m["workers"], m["period"], compute_secs, m["seconds"],
                               len(combos) + first, m["warm"])  # fmt: skip
                repeats.append({**again, "rate": m["rate"], "repeat_of": first})
                log("    again: " + scale_windows.window_line(repeats[-1]))
    if cluster.network is not None:
        cluster.set_ps_rate(None)
    result = {"ps": ps_tasks, "wire": wire, "memory": memory,
              "memory_after_windows": cluster.ps_memory(ps_tasks), "windows": windows,
              "repeats": repeats,
              "skipped": skipped, "hosts_rss": [rss_bytes(h.pid) for h in cluster.hosts],
              "fds": {"ps": [open_fds(cluster.ps[i].pid) for i in range(ps_tasks)],
                      "hosts": [open_fds(h.pid) for h in cluster.hosts]}}  # fmt: skip
    if ps_tasks == plan["ps"][0] and wire is None:
        # The ceiling: every worker's steps without an exchange (the waits alone).
        result["local"] = [window(cluster, w, 10**9, compute_secs, 2.0, 0) for w in plan["workers"]]
    cluster.pin(False)
    release(cluster, container)
    cluster.stop_ps()
    return result


def exchange_alone(cluster, model, ps_tasks, wire, container, form="at_once"):
    """One worker exchanging back to back: the CPU of an exchange with nothing else."""
    build(cluster, model, ps_tasks, wire, container, 0, 1, 1, form)
    cluster.pin()
    measured = window(cluster, 1, 1, 0.0, CONSTANTS_SECS, seed=0)
    cluster.pin(False)
    release(cluster, container)
    return {**measured, "model": model, "ps": ps_tasks, "wire": wire}


def calls(cluster, plan, log):
    """One worker's exchange alone (float32) in each of `protocol.CALL_FORMS`, the forms in
    interleaved rounds, for each link rate and ps count of `plan`: the latency of each in
    the same run (scale_pieces.calls_table)."""
    rows = []
    for rate in plan["calls_rates"]:
        if cluster.network is not None:
            cluster.set_ps_rate(rate)
        for ps_tasks in plan["calls_ps"]:
            for round_index in range(plan["calls_rounds"]):
                for form in interleaved(tuple(protocol.CALL_FORMS), round_index):
                    kind = list(protocol.CALL_FORMS).index(form)  # A container has no "_".
                    container = f"q{os.getpid()}p{ps_tasks}r{round_index}f{kind}{rate}"
                    m = exchange_alone(cluster, MODEL, ps_tasks, None, container, form)
                    rows.append({**m, "rate": rate, "form": form, "round": round_index})
                    log(f"  calls {protocol.CALL_FORMS[form]}: " + scale_windows.window_line(m))
    if cluster.network is not None:
        cluster.set_ps_rate(None)
    return rows


def job(cluster, model, workers, ps_tasks, log):
    """Start-up and end of a `workers`-worker job as easgd-train runs it (`Host.job`), and
    the ps tasks' CPU while the others wait for the late chief."""
    container, model_dir = f"j{os.getpid()}w{workers}", tempfile.mkdtemp(prefix="easgd-scale-job-")
    common = {"model": model, "ps_tasks": ps_tasks, "num_workers": workers, "container": container,
              "exchanges": JOB_EXCHANGES}  # fmt: skip
    cluster.call_hosts(_hosts(cluster, workers, "job", **common))
    start_at = wall_time_in(2.0)
    timing = {"start_at": start_at, "chief_delay": CHIEF_DELAY_SECS, "model_dir": model_dir}
    commands = _hosts(cluster, workers, "job", **timing, **common)

    def ps_cpu():
        return sum(cluster.counters()["ps_cpu"][:ps_tasks])

    waiting = _edges(start_at + 0.5, CHIEF_DELAY_SECS - 0.5, ps_cpu)
    answers, (before, after) = cluster.call_hosts(commands, waiting)
    cluster.call(0, "release", container=container)
    times = [t for answer in answers.values() for t in answer["workers"]]
    chief = next(t for t in times if t["index"] == 0)
    others, last = [t for t in times if t["index"] != 0], max(t["finished"] for t in times)
    m = {
        "workers": workers, "ps": ps_tasks, "chief": chief,
        "chief_ready": chief["ready"] - CHIEF_DELAY_SECS,  # Seconds from the chief's start.
        "others_ready": percentiles([t["ready"] - CHIEF_DELAY_SECS for t in others]),
        "last_ready": max(t["ready"] for t in times) - CHIEF_DELAY_SECS,
        "waiting_ps_cores": (after - before) / (CHIEF_DELAY_SECS - 0.5),
        "wait_for_counts": chief["saved_from"] - last,
        "checkpoint": chief["saved"] - chief["saved_from"],
        "export": chief["exported"] - chief["exported_from"],
        "acknowledged": chief["done"] - chief["ended"],
        "end_of_job": chief["done"] - last,
        "others_done_after_end": percentiles([t["done"] - chief["ended"] for t in others]),
    }  # fmt: skip
    log(f"  job of {workers} workers: the chief's session {m['chief_ready']:.2f} s, the last's "
        f"{m['last_ready']:.2f} s after its start; end of job {m['end_of_job']:.2f} s")  # fmt: skip
    return m


def ledger(cluster, workers, poll, quick, log):
    """The work ledger on ps 0 with `workers` writing it back to back (`poll` None) or
    polling it (`Host.ledger_load`): calls/s, latency, ps 0's CPU."""
    seconds = LEDGER_SECS[quick]
    container = f"l{os.getpid()}w{workers}{poll or 'write'}"
    common = {"num_workers": workers, "container": container}
    cluster.call(0, "ledger_load", workers=[0], **common)
    start_at = wall_time_in(5.0)  # After every session and its first poll.
    window = {"start_at": start_at, "seconds": seconds, "poll": poll}
    commands = _hosts(cluster, workers, "ledger_load", **window, **common)
    edges = _edges(start_at, seconds, lambda: cluster.counters()["ps_cpu"][0])
    answers, (before, after) = cluster.call_hosts(commands, edges)
    cluster.call(0, "release", container=container)
    latencies = sorted(t for answer in answers.values() for t in answer["latencies"])
    m = {"workers": workers, "poll": poll, "poll_secs": next(iter(answers.values()))["poll_secs"],
         "calls_per_sec": len(latencies) / seconds, "latency": percentiles(latencies),
         "ps0_cpu_per_call": (after - before) / max(len(latencies), 1),
         "ps0_cores": (after - before) / seconds}  # fmt: skip
    log(f"  ledger, {workers} workers, {poll or 'write'}: {m['calls_per_sec']:.0f} calls/s")
    return m


def checkpoint(cluster, model, ps_tasks, log):
    """easgd-train's sharded checkpoint of the centre on `ps_tasks` ps tasks."""
    container = f"c{os.getpid()}p{ps_tasks}"
    model_dir = tempfile.mkdtemp(prefix="easgd-scale-ckpt-")
    answer = cluster.call(0, "checkpoint", model=model, ps_tasks=ps_tasks, container=container,
                          model_dir=model_dir, repeats=CHECKPOINT_REPEATS)  # fmt: skip
    cluster.call(0, "release", container=container)
    save, restore = (percentiles(answer[k]) for k in ("save_secs", "restore_secs"))
    log(f"  checkpoint on {ps_tasks} ps: save {save['median']:.3f} s")
    return {"ps": ps_tasks, "save": save, "restore": restore}


def measure(results, log):
    """Runs the harness (module docstring) into `results`."""
    quick, plan = results["quick"], dict(QUICK if results["quick"] else FULL)
    reason = network.unavailable_reason(rate="1gbit")
    if reason:
        plan["rates"] = plan["bf16_rates"] = plan["calls_rates"] = (None,)
    results.update(model=MODEL, plan=plan, netns=reason is None, netns_skip_reason=reason,
                   pinning={"ps": PS_CPUS, "workers": WORKER_CPUS})  # fmt: skip
    results["reuse_freed_memory"] = True
    # The library's exchange (its calls at once, its replies while the values come in);
    # the model follows it.
    results["calls_at_once"] = results["replies_at_once"] = True
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-scale-logs-"))
    most = max(plan["workers"])
    max_ps = max(plan["ps"])
    with ScaleCluster(max_ps, most, plan["hosts"], logs, reason is None) as cluster:
        log(f"{most} workers in {plan['hosts']} hosts; logs {logs}; links: {reason or 'shaped'}")
        compute_secs = cluster.call(0, "calibrate", model=MODEL)["compute_secs"]
        results.update(compute_secs=compute_secs, constants=[])
        log(f"a local step of {MODEL}: {compute_secs * 1e3:.1f} ms")
        cluster.start_ps()
        ps_counts = (1, 4) if len(plan["ps"]) > 2 else (1,)
        passes = [
            (m, p, w) for m in plan["constants_models"] for p in ps_counts for w in plan["wires"]
        ]
        for index, (model, ps_tasks, wire) in enumerate(passes):
            container = f"k{os.getpid()}x{index}"
            results["constants"].append(exchange_alone(cluster, model, ps_tasks, wire, container))
            log("  constants " + scale_windows.window_line(results["constants"][-1]))
        cluster.stop_ps()
        rough = scale_report.rough_costs(results["constants"], MODEL)
        results["ps_counts"] = [
            measure_ps_count(cluster, plan, quick, ps_tasks, wire, compute_secs, rough, log)
            for ps_tasks in plan["ps"]
            for wire in plan["wires"]
        ]
        cluster.start_ps()
        results["pieces"] = {
            "checkpoint": [checkpoint(cluster, MODEL, p, log) for p in plan["ps"]],
            "ledger": [ledger(cluster, most, poll, quick, log) for poll in (None, "read", "end")],
            "job": [job(cluster, MODEL, w, max(plan["ps"]), log) for w in sorted({2, most})],
            "chief_delay_secs": CHIEF_DELAY_SECS,
        }
        cluster.stop_ps()
    # One exchange alone, in a cluster of its own: the 63 idle worker servers of the cluster
    # above share the worker's core and made its exchange at 4 ps 1 Gbit/s about a tenth
    # slower (a probe on e94623b: 70 ms against 64), the serial forms' hardly at all.
    alone = {"workers": 1, "hosts": 1}
    with ScaleCluster(max(plan["calls_ps"]), alone["workers"], alone["hosts"], logs / "calls",
                      reason is None) as cluster:  # fmt: skip
        cluster.start_ps()
        results["calls"] = calls(cluster, plan, log)
        results["calls_cluster"] = alone
        cluster.stop_ps()
    if not quick:  # Processes that leave the C allocator as it is (BENCHMARKS.md section 6).
        with ScaleCluster(1, 1, 1, logs / "untuned", reason is None, malloc=False) as cluster:
            cluster.start_ps()
            untuned = exchange_alone(cluster, MODEL, 1, None, f"u{os.getpid()}")
            results["constants_untuned"] = untuned


if __name__ == "__main__":
    app.run(lambda argv: report.drive("benchmarks.scale", "scale", "docs/SCALING.md", measure,
                                      scale_report.write))  # fmt: skip
