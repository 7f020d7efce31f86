"""Section 1 of BENCHMARKS.md, worker throughput: steps/s of every configuration over loopback.

1 ps + 2 worker processes (common/task.py) run each configuration of common/graphs.py in
interleaved rounds: the MLP and the CNN in TF1 graph mode, the MLP again in TF2's (resource
variables). run.py gives this section the TF1 cluster it shares with sections 2 and 3; the
TF2 cluster is this section's own. Its targets judge easgd-10 against async SGD and against
the copy-only floor, bounded by the arithmetic the exchange section measures.
"""

import statistics

from benchmarks import exchange
from benchmarks.common import protocol, report
from benchmarks.common.harness import BenchCluster, throughput
from benchmarks.common.report import median_of, num, per_round_ratio, table

FULL_CONFIGS = ("local", "async", "sync", "easgd-1", "easgd-4", "easgd-10", "easgd-64",
                "easgd-10-remotecall", "naive-easgd-10", "copy-easgd-10")  # fmt: skip
QUICK_CONFIGS = ("local", "async", "sync", "easgd-1", "easgd-10", "easgd-64")
#: The CNN and TF2 graph mode repeat the configurations a table row is judged or read by:
#: the transports and the variants near async SGD say nothing new there (~2.5 min of
#: `make bench`).
CNN_CONFIGS = ("local", "async", "easgd-4", "easgd-10", "easgd-64", "copy-easgd-10")
TF2_CONFIGS = ("local", "async", "easgd-10", "copy-easgd-10")
MLP, CNN = protocol.COMM_MLP.name, protocol.COMPUTE_CNN.name
#: easgd-10 against the copy-only floor; or, where the CPU of EASGD's arithmetic bounds it
#: lower on cores the copy already fills, that bound less BOUND_MARGIN.
COPY_TARGET, BOUND_MARGIN = 0.97, 0.02


def window(quick):
    """(rounds, (seconds of a window, of warm-up before it))."""
    return (1, (3.0, 1.5)) if quick else (3, (8.0, 3.0))


def configs(quick):
    """The MLP's configurations on TF1 (section 2 counts the bytes of the same)."""
    return QUICK_CONFIGS if quick else FULL_CONFIGS


def measure_tf1(cluster, quick, log):
    """{model: {config: [rounds]}} on `cluster`, the TF1 cluster of 1 ps + the workers."""
    rounds, seconds = window(quick)
    measured = {MLP: throughput(cluster, MLP, configs(quick), rounds, *seconds, log)}
    if not quick:  # The CNN in half the rounds.
        measured[CNN] = throughput(cluster, CNN, CNN_CONFIGS, (rounds + 1) // 2, *seconds, log)
    return measured


def measure_tf2(workers, netns, logs, log):
    """{MLP: {config: [rounds]}} on a TF2 cluster of its own (not in a smoke run)."""
    rounds, _ = window(False)
    with BenchCluster(workers, logs / "tf2", world="tf2", netns=netns) as cluster:
        log(f"cluster up: 1 ps + {workers} workers (tf2)")
        return {MLP: throughput(cluster, MLP, TF2_CONFIGS, (rounds + 1) // 2, 8.0, 3.0, log)}


def _panels(results):
    panels = [(f"{m}, TF1", r) for m, r in results.get("throughput", {}).items()]
    return panels + [(f"{m}, TF2", r) for m, r in results.get("throughput_tf2", {}).items()]


def render(results, plots):
    """The Markdown of section 1 (without its side by side with contrib), where measured."""
    panels = _panels(results)
    if not panels:
        return []
    rows = []
    for config in dict.fromkeys(c for _, by_config in panels for c in by_config):
        cells = [config]
        for _, by_config in panels:
            cells.append(num(median_of(by_config, config)))
            cells.append(num(per_round_ratio(by_config, config, "local"), 2))
        rows.append([*cells, num(per_round_ratio(panels[0][1], config, "async"), 2)])
    names = " | ".join(f"{name} steps/s | x local" for name, _ in panels)
    header = f"-configuration | {names} | x async ({panels[0][0]})"
    made = report.made_by(results, "throughput", "throughput")
    out = ["## 1. Worker throughput", "", made, "", THROUGHPUT, "", table(header, rows), ""]
    return out + ([f"![throughput]({plots['throughput']})", ""] if "throughput" in plots else [])


def targets(results):
    """(target, measured, met) rows: easgd-10 against the copy-only floor and async SGD."""
    rows, by_config = [], results.get("throughput", {}).get(MLP, {})
    for reference, goal in (("copy-easgd-10", COPY_TARGET), ("async", 1.5)):
        if reference in by_config and "easgd-10" in by_config:
            ratio = median_of(by_config, "easgd-10") / median_of(by_config, reference)
            in_round = per_round_ratio(by_config, "easgd-10", reference)
            measured = f"{ratio:.2f} x (medians), {in_round:.2f} x (per round)"
            target = f"easgd-10 >= {goal} x `{reference}` ({MLP})"
            bound = _arithmetic_bound(results) if reference == "copy-easgd-10" else None
            floor = goal
            if bound is not None:
                target = target[:-1] + "; or its arithmetic's bound - 2 points)"
                measured += f"; bound {bound[0]:.3f} x ({bound[1]:.1f} ms CPU an exchange)"
                floor = min(goal, bound[0] - BOUND_MARGIN)
            rows.append((target, measured, ratio >= floor))
    return rows


def _arithmetic_bound(results):
    """(the most easgd-10 can make of copy-easgd-10's steps/s, the arithmetic's CPU ms an
    exchange), or None if not measured.

    Both run on cores the 2 workers and the ps fill: each exchange's arithmetic (`easgd-1`
    less `copy-easgd-1`, worker + ps) adds its CPU, shared by the cores, to a worker's
    period of copy-easgd-10 steps.
    """
    arithmetic_ms = exchange.arithmetic_ms(results)
    by_config = results.get("throughput", {}).get(MLP, {})
    if arithmetic_ms is None or "copy-easgd-10" not in by_config:
        return None
    workers, cores = results["workers"], results["machine"]["cores"] or 1
    period_ms = 10 * 1e3 / median_of(by_config, "copy-easgd-10")
    added_ms = max(arithmetic_ms, 0.0) * workers / cores
    return period_ms / (period_ms + added_ms), arithmetic_ms


def plot(results, out):
    """throughput.png into `out`: {name: path}."""
    panels = _panels(results)
    if not panels:
        return {}
    figure, axes = report.pyplot().subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2))
    for axis, (title, by_config) in zip(figure.axes, panels, strict=True):
        rounds = [report.per_round(runs) for runs in by_config.values()]
        medians = [statistics.median(v) for v in rounds]
        errors = [[m - min(v) for m, v in zip(medians, rounds, strict=True)],
                  [max(v) - m for m, v in zip(medians, rounds, strict=True)]]  # fmt: skip
        axis.bar(list(by_config), medians, yerr=errors, capsize=3)
        axis.set(title=title, ylabel="steps/s per worker (median, min-max)")
        axis.tick_params(axis="x", rotation=45, labelsize=8)
    return {"throughput": report.save_figure(figure, out / "throughput.png")}


THROUGHPUT = """\
Steps/s per worker (median of interleaved rounds) and the median per-round ratio. `local`:
no ps; `async`/`sync`: variables on the ps; `easgd-P`: period P, rho 0, direct calls;
`-remotecall`: by RemoteCall; `naive-`: a cross-device cond; `copy-`: no arithmetic (floor)."""
