"""Measurements on a shaped network: each task on a host of its own, its link rate-limited.

`shaped_section` starts, for each link rate, a 1 ps + W worker cluster whose tasks talk
through a private switch over links limited with `tc` (`BenchCluster(rate=...)`), and
measures every configuration's throughput and the bytes crossing the parameter server's
link, interleaved in rounds; at the first rate also the time to accuracy. BENCHMARKS.md
sections 5 and 6 (`shaped_report.py`) show them with the cost model's predictions.
"""

import threading
import time

from benchmarks import sections
from benchmarks.cluster import BenchCluster, wall_time_in
from tf_contrib_easgd.trainer import network

CONFIGS = (
    "local",
    "async",
    "sync",
    "easgd-1",
    "easgd-4",
    "easgd-10",
    "easgd-64",
    "easgd-10-overlap",
    "easgd-10-bf16",
    "easgd-10-overlap-bf16",
)
QUICK_CONFIGS = ("local", "async", "easgd-10", "easgd-10-overlap", "easgd-10-bf16")
#: EASGD with the library's defaults (moving rate 0.9 / tau / W, rho = its learning-rate
#: rule), and with easgd-train's defaults in task mode (the paper's moving rate 0.9 / W,
#: rho 0, overlap, a bfloat16 wire), the same at full width.
EASGD_DEFAULTS = "easgd-10-alphadefault-rhodefault"
EASGD_TRAIN = "easgd-10-alpha0.45-overlap-bf16"
EASGD_TRAIN_FLOAT32 = "easgd-10-alpha0.45-overlap"
#: Per rate: ((configuration, workers; None: all), ...), repeats, seconds of a run, for
#: time to accuracy. At 100 Mbit/s the two wires, at period 64 (an exchange of this model
#: takes some 2 s there).
ACCURACY = {
    "1gbit": (
        (("async", None), (EASGD_DEFAULTS, None), (EASGD_TRAIN_FLOAT32, None), (EASGD_TRAIN, None)),
        2,
        40.0,
    ),
    "100mbit": (
        (("easgd-64-alpha0.45-overlap", None), ("easgd-64-alpha0.45-overlap-bf16", None)),
        3,
        90.0,
    ),
}
QUICK_ACCURACY = {"1gbit": ((("async", None), (EASGD_TRAIN, None)), 1, 15.0)}
#: One worker pinned to one core and the ps to the other (cores >= tasks), at 1 Gbit/s: at
#: period 10 and at 32, where an exchange's round trip on the wire fits in the period.
PINNED_CONFIGS = (
    "local",
    "easgd-10",
    "easgd-10-overlap",
    "easgd-10-overlap-bf16",
    "easgd-32",
    "easgd-32-overlap",
    "easgd-32-overlap-bf16",
)
PINNED_CPUS = {"worker": (0,), "ps": (1,)}
#: Per rate: (seconds of a window, seconds of warm-up before it, rounds). A worker takes at
#: least two steps before its window; at 100 Mbit/s an async or sync step takes seconds.
WINDOWS = {"1gbit": (8.0, 3.0, 3), "100mbit": (15.0, 6.0, 2)}
#: --quick measures the first rate only.
QUICK_WINDOWS = {"1gbit": (4.0, 2.0, 1)}


def shaped_section(model, workers, quick, rounds, log_dir, log):
    """Throughput at every rate (and time to accuracy at the first) on shaped clusters.

    Args:
        rounds: rounds at every rate; None: those of `WINDOWS`.

    Returns:
        `{"skipped": why}` where no shaped network can be made here; else `{"rates": {rate:
        {"throughput": ..., "accuracy": ... (first rate only)}}, "workers": W}`.
    """
    reason = network.unavailable_reason(rate="1gbit")
    if reason is not None:
        log(f"shaped network: SKIPPED, {reason}")
        return {"skipped": reason}
    results = {"workers": workers, "model": model, "rates": {}}
    windows = QUICK_WINDOWS if quick else WINDOWS
    for rate in windows:
        seconds, warm_secs, rate_rounds = windows[rate]
        with BenchCluster(1, workers, "tf1", log_dir / f"shaped-{rate}", rate=rate) as cluster:
            log(f"shaped network {rate}: 1 ps + {workers} workers, a host each")
            measured = {
                "throughput": sections.throughput(
                    cluster,
                    model,
                    QUICK_CONFIGS if quick else CONFIGS,
                    rounds or rate_rounds,
                    seconds,
                    warm_secs,
                    log,
                    measure=window_with_bytes,
                )
            }
            accuracy = (QUICK_ACCURACY if quick else ACCURACY).get(rate)
            if accuracy is not None:
                configs, repeats, run_secs = accuracy
                log(f"shaped network {rate}: time to accuracy")
                measured["accuracy"] = sections.time_to_accuracy(
                    cluster, configs, repeats, run_secs, eval_every=1.0, log=log
                )
            results["rates"][rate] = measured
    return results


def pinned_section(model, quick, rounds, log_dir, log):
    """Throughput at 1 Gbit/s of one worker pinned to one core, the ps to the other: where
    cores >= tasks, as on separate machines.

    Returns:
        `{"skipped": why}`, or {"throughput": ..., "cpus": PINNED_CPUS}.
    """
    reason = network.unavailable_reason(rate="1gbit")
    if reason is not None:
        log(f"pinned: SKIPPED, {reason}")
        return {"skipped": reason}
    seconds, warm_secs, default_rounds = WINDOWS["1gbit"]
    with BenchCluster(1, 1, "tf1", log_dir / "pinned", rate="1gbit", cpus=PINNED_CPUS) as cluster:
        log(f"pinned: 1 ps + 1 worker at 1gbit, cpus {PINNED_CPUS}")
        return {
            "cpus": PINNED_CPUS,
            "model": model,
            "throughput": sections.throughput(
                cluster,
                model,
                PINNED_CONFIGS[:3] if quick else PINNED_CONFIGS,
                1 if quick else rounds or default_rounds,
                seconds,
                warm_secs,
                log,
                measure=window_with_bytes,
            ),
        }


def window_with_bytes(cluster, workers, seconds, warm_secs):
    """Runs a window of `seconds` on `workers`, counting the bytes of the ps's link in it
    (a `measure` of `sections.throughput`).

    A worker's rate is its steps over the time from the window's start to the end of its
    last step in the window: exact also where a step takes seconds.
    """
    start_at = wall_time_in(warm_secs)
    answers = []

    def run():
        answers.extend(
            cluster.call_all(
                workers, "run", sections.CALL_TIMEOUT_SECS, start_at=start_at, seconds=seconds
            )
        )

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    tasks = [process.name for process in cluster.processes]
    time.sleep(max(0.0, start_at - time.time()))
    before = sum(cluster.link_bytes("ps0"))
    cpu_before = {task: cluster.cpu_seconds(task) for task in tasks}
    time.sleep(max(0.0, start_at + seconds - time.time()))
    after = sum(cluster.link_bytes("ps0"))
    cpu = {task: (cluster.cpu_seconds(task) - cpu_before[task]) / seconds for task in tasks}
    runner.join(sections.CALL_TIMEOUT_SECS)
    if runner.is_alive() or len(answers) != len(workers):
        raise RuntimeError("the workers did not answer after their window")
    measured = {
        "per_worker": [a["steps"] / a["elapsed"] if a["elapsed"] > 0 else 0.0 for a in answers],
        "steps": [a["steps"] for a in answers],
        "ps_bytes": after - before,
        "seconds": seconds,
        "cpu_share": cpu,  # CPU seconds per second of the window, per task.
    }
    return (
        measured,
        f", {link_bytes_per_step(measured) / 1e6:.2f} MB per local step on the ps's link",
    )


def link_bytes_per_step(measured):
    """Bytes on the ps's link per local step of a window: its bytes over the steps the
    workers' rates give for the whole window (a count of whole steps would leave out the
    bytes of the steps still in flight at its end, a large error where steps take seconds)."""
    steps = sum(measured["per_worker"]) * measured["seconds"]
    return measured["ps_bytes"] / steps if steps > 0 else 0.0
