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
)
QUICK_CONFIGS = ("local", "async", "easgd-10", "easgd-10-overlap")
#: EASGD with the library's defaults (moving rate 0.9 / tau / W, rho = its learning-rate
#: rule), and with the settings that trained fastest in docs/TUNING.md (the paper's moving
#: rate 0.9 / W, rho 0), overlapped.
EASGD_DEFAULTS = "easgd-10-alphadefault-rhodefault"
EASGD_BEST = "easgd-10-alpha0.45-overlap"
#: (configuration, workers; None: all) for time to accuracy.
ACCURACY_CONFIGS = (
    ("local", 1),
    ("async", None),
    ("sync", None),
    (EASGD_DEFAULTS, None),
    (EASGD_BEST, None),
)
QUICK_ACCURACY_CONFIGS = (("async", None), (EASGD_BEST, None))
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
    for index, rate in enumerate(windows):
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
            if index == 0:
                log(f"shaped network {rate}: time to accuracy")
                measured["accuracy"] = sections.time_to_accuracy(
                    cluster,
                    QUICK_ACCURACY_CONFIGS if quick else ACCURACY_CONFIGS,
                    repeats=1 if quick else 2,
                    seconds=15.0 if quick else 40.0,
                    eval_every=1.0,
                    log=log,
                )
            results["rates"][rate] = measured
    return results


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
    time.sleep(max(0.0, start_at - time.time()))
    before = sum(cluster.link_bytes("ps0"))
    time.sleep(max(0.0, start_at + seconds - time.time()))
    after = sum(cluster.link_bytes("ps0"))
    runner.join(sections.CALL_TIMEOUT_SECS)
    if runner.is_alive() or len(answers) != len(workers):
        raise RuntimeError("the workers did not answer after their window")
    measured = {
        "per_worker": [a["steps"] / a["elapsed"] if a["elapsed"] > 0 else 0.0 for a in answers],
        "steps": [a["steps"] for a in answers],
        "ps_bytes": after - before,
        "seconds": seconds,
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
