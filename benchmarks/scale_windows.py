"""What a window of the scale harness measured (benchmarks/scale.py): its latencies'
percentiles, CPU per exchange, log line, whether it runs again longer, the windows the
report keeps, the share of the pinned cores not charged to the run, and the table of
windows run twice.
"""

import statistics

import numpy as np

from benchmarks.common.network import rate_bits_per_sec
from benchmarks.common.report import ms, table

#: A window that held fewer than three of its workers' cycles (the rough model's guess of
#: the cycle was short) runs again, three measured cycles long, if that is this much longer:
#: in 83200f2's run 44 of 142 windows held fewer than three, 3 of them two or fewer.
LONGER_BY = 1.5


def percentiles(values):
    """{"median", "p99", "mean", "n"} of `values` (None where empty)."""
    if not values:
        return {"median": None, "p99": None, "mean": None, "n": 0}
    return {"median": float(np.median(values)), "p99": float(np.percentile(values, 99)),
            "mean": float(np.mean(values)), "n": len(values)}  # fmt: skip


def wire_bytes(params, wire):
    """Bytes an exchange sends each way: 4 per parameter, or 2 on a 16-bit wire."""
    return params * (2 if wire else 4)


def per_exchange(m):
    """(ps CPU, worker hosts' CPU) per exchange of window `m`, seconds."""
    return sum(m["ps_cpu"]) / m["exchanges"], m["hosts_cpu"] / m["exchanges"]


def rate_name(rate):
    return f"{rate_bits_per_sec(rate) / 1e9:g} Gbit/s" if rate else "veth"


def window_line(m):
    """One window (or constants row) for the progress log."""
    exchanges = max(m["exchanges"], 1)
    ps, hosts = sum(m["ps_cpu"]) / exchanges * 1e3, m["hosts_cpu"] / exchanges * 1e3
    return (
        f"{m.get('model', '')} W={m['workers']} tau={m['period']} {m.get('rate') or 'veth'}: "
        f"{m['exchanges'] / m['seconds']:.1f} x/s, latency {ms(m['latency']['median'])} ms, "
        f"ps {ps:.1f} ms/x, hosts {hosts:.1f} ms/x"
    )


def again(measured, longest, warm_bounds):
    """(warm-up, window) seconds for running window `measured` again: three of its workers'
    measured cycles, at most `longest`, warmed up one cycle within `warm_bounds` (low,
    high). None when it held three cycles, or the new window would not be LONGER_BY times
    as long (so only windows of two cycles or fewer run again)."""
    cycles = measured["exchanges"] / measured["workers"]
    if cycles >= 3:
        return None
    cycle = measured["seconds"] / cycles if cycles else longest
    seconds = min(longest, 3 * cycle)
    if seconds < LONGER_BY * measured["seconds"]:
        return None
    return min(max(cycle, warm_bounds[0]), warm_bounds[1]), seconds


def valid(results):
    """(ps tasks, wire, window) of the windows in which every worker completed an exchange
    on average (fewer: the window was shorter than a worker's cycle)."""
    for pc in results["ps_counts"]:
        for window in pc["windows"]:
            if window["exchanges"] >= window["workers"]:
                yield pc["ps"], pc["wire"], window


def window_others(results, window):
    """The share of each pinned core (ps, workers) not charged to the run's processes in
    `window` (other processes, the kernel's network work), or None where not recorded."""
    pinned = results["pinning"]
    if "cpus" not in window or pinned["ps"] is None:
        return None
    used = (sum(window["ps_cpu"]), window["hosts_cpu"])
    cores = (int(pinned["ps"]), int(pinned["workers"]))
    shares = zip(cores, used, strict=True)
    return [max(0.0, window["cpus"][c] - mine) / window["seconds"] for c, mine in shares]


def repeats_table(results):
    """Windows run twice: exchanges/s the first time and again."""
    rows = []
    for pc in results["ps_counts"]:
        for repeat in pc.get("repeats", []):
            first = pc["windows"][repeat["repeat_of"]]
            rates = [m["exchanges"] / m["seconds"] for m in (first, repeat)]
            rows.append([pc["ps"], rate_name(repeat["rate"]), repeat["period"], repeat["workers"],
                         f"{rates[0]:.1f}", f"{rates[1]:.1f}",
                         f"{max(rates) / min(rates):.2f}" if min(rates) else "-"])  # fmt: skip
    if not rows:
        return []
    spread = statistics.median(float(r[-1]) for r in rows if r[-1] != "-")
    return [
        "### The same window again", "",
        f"Exchanges/s of a window and of its repeat at the end of its ps count's pass (median "
        f"ratio of the larger to the smaller {spread:.2f}): a single window's error within "
        "that spread is not the model's.", "",
        table("ps | -link | tau | W | first | again | ratio", rows), "",
    ]  # fmt: skip
