"""Sections 5 and 6 of BENCHMARKS.md: the shaped network, and the cost model beyond it.

From `shaped.shaped_section`'s results: the targets, a throughput table per link rate,
time to accuracy at the first rate, the cost model fitted on those runs (predicted against
measured), its predictions for larger clusters, and the two plots.
"""

import json
import pathlib
import statistics

from benchmarks import cost_model, shaped, specs
from benchmarks.plots import PLOT_DPI
from benchmarks.tables import (
    accuracy_summary,
    accuracy_table,
    median_time,
    per_round_ratio,
    summarize_throughput,
    theory_bytes,
)
from tf_contrib_easgd.trainer.network import rate_bits_per_sec

#: Where `make bench-scale` writes the CPU costs that the cost model uses here.
SCALE_RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "scale.json"
#: The larger clusters the cost model predicts: link rates (bits/s), ps tasks, workers.
PREDICTED_RATES = (10e9, 25e9)
PREDICTED_PS = (1, 4)
PREDICTED_WORKERS = (8, 64, 256)
PREDICTED_CONFIGS = ("async", "sync", "easgd-10", "easgd-64", "easgd-10-overlap")
#: The cores of each ps task's machine in those predictions (docs/SCALING.md's rule).
PREDICTED_PS_CORES = 4


def rate_text(rate):
    """ "1gbit" -> "1 Gbit/s"."""
    bits = rate_bits_per_sec(rate)
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


def _box(results, rate, workers):
    """The shaped runs' cluster as the cost model sees it: 1 ps + W workers, every task and
    the workers' compute on the machine's cores."""
    cores = results.get("machine", {}).get("cores") or 2
    return cost_model.Cluster(rate_bits_per_sec(rate), workers, 1, shared_cores=cores)


def _measurements(results, model_bytes):
    """(config, compute secs, Cluster, measured secs per step) of every shaped median."""
    shaped_results, rows = results["shaped"], []
    for rate, measured in shaped_results["rates"].items():
        summary = summarize_throughput(measured["throughput"])
        compute = 1.0 / summary["local"][0]
        cluster = _box(results, rate, shaped_results["workers"])
        rows += [
            (config, compute, cluster, 1.0 / median)
            for config, (median, _, _) in summary.items()
            if config != "local" and median > 0
        ]
    return rows


def measured_costs(path=SCALE_RESULTS):
    """The CPU of an exchange as `make bench-scale` measured it (`path`, its results) in
    processes that leave the C allocator as it is, as this suite's do: per byte moved on
    the worker and served on the ps (`Costs`); no CPU at all where it has not run."""
    try:
        row = json.loads(pathlib.Path(path).read_text())["constants_untuned"]
    except (OSError, KeyError, ValueError):
        return cost_model.Costs(), None
    moved = 2 * 4 * specs.MODELS[row["model"]].num_params * row["exchanges"]
    costs = cost_model.Costs(
        worker_byte_secs=row["hosts_cpu"] / moved, ps_byte_secs=sum(row["ps_cpu"]) / moved
    )
    return costs, json.loads(pathlib.Path(path).read_text())["revision"]["commit"]


def fitted(results, params):
    """The cost model's `Costs` for the shaped runs: the measured CPU, the fitted link."""
    model_bytes = 4.0 * params
    costs, _ = measured_costs()
    return cost_model.fit_link_efficiency(_measurements(results, model_bytes), model_bytes, costs)


def targets(results):
    """(target, measured, met) rows of the shaped network's targets."""
    shaped_results = results.get("shaped", {})
    if "rates" not in shaped_results:
        return []
    rows = []
    for rate, measured in shaped_results["rates"].items():
        by_config = measured["throughput"]
        where = f"{rate_text(rate)} per task, {shaped_results['model']}"
        if rate == "1gbit":
            # easgd-10 against local: the pinned section's target (the two-worker run
            # shares two cores among three tasks; its ratio is a figure of section 5).
            for config, reference, goal in (("easgd-10", "async", 5.0),):
                ratio = per_round_ratio(by_config, config, reference)
                rows.append(
                    (
                        f"{config} >= {goal:g} x {reference} ({where})",
                        "-" if ratio is None else f"{ratio:.2f} x (median of per-round ratios)",
                        None if ratio is None else ratio >= goal,
                    )
                )
        narrow, wide = (
            link_megabytes(by_config, "easgd-10-bf16"),
            link_megabytes(by_config, "easgd-10"),
        )
        if narrow is not None and wide is not None:
            rows.append(
                (
                    f"bytes on the ps's link: easgd-10-bf16 <= 0.52 x easgd-10 ({where})",
                    f"{narrow / wide:.3f} x ({narrow:.2f} against {wide:.2f} MB per local step)",
                    narrow / wide <= 0.52,
                )
            )
        if "accuracy" in measured:
            rows += _accuracy_targets(results, rate, measured["accuracy"])
    return rows


def link_megabytes(by_config, config):
    """Median MB on the ps's link per local step of `config`, or None if not measured."""
    if config not in by_config:
        return None
    return statistics.median(shaped.link_bytes_per_step(run) for run in by_config[config]) / 1e6


def _accuracy_targets(results, rate, accuracy):
    """Time-to-accuracy rows at `rate`: easgd-train's defaults against async at 1 Gbit/s;
    the 16-bit wire against float32 at 100 Mbit/s (time, and final accuracy)."""
    target = results["accuracy_target"]
    summary = accuracy_summary(accuracy, target)
    times = {config: median_time(row[0]) for config, row in summary.items()}
    rows = []
    if shaped.EASGD_TRAIN in summary and "async" in summary:
        mine, asynchronous = times[shaped.EASGD_TRAIN], times["async"]
        rows.append(
            (
                f"time to {target:.0%}: easgd-train's defaults (`{shaped.EASGD_TRAIN}`) <= "
                f"0.5 x async ({rate_text(rate)})",
                f"{_seconds(mine)}; async {_seconds(asynchronous)} (medians)",
                None if asynchronous is None else mine is not None and mine <= 0.5 * asynchronous,
            )
        )
    wires = [config for config in summary if config.endswith("-bf16")]
    for narrow in wires:
        wide = narrow.removesuffix("-bf16")
        if wide not in summary:
            continue
        # The 16-bit wire's time target is where the wire is the bottleneck, 100 Mbit/s; at
        # 1 Gbit/s the overlapped exchange hides the wire and the times are figures.
        if rate == "100mbit":
            rows.append(
                (
                    f"time to {target:.0%}: `{narrow}` <= 0.6 x `{wide}` ({rate_text(rate)})",
                    f"{_seconds(times[narrow])}; float32 {_seconds(times[wide])} (medians)",
                    None
                    if times[wide] is None
                    else times[narrow] is not None and times[narrow] <= 0.6 * times[wide],
                )
            )
        finals, references = summary[narrow][1], summary[wide][1]
        # The noise of float32's final accuracy: the spread of its repeats, at least one
        # test image of the 355.
        noise = max(max(references) - min(references), 1 / 355)
        gap = statistics.median(references) - statistics.median(finals)
        rows.append(
            (
                f"final accuracy: `{narrow}` within the noise of `{wide}` ({rate_text(rate)})",
                f"{statistics.median(finals):.3f} against {statistics.median(references):.3f} "
                f"(medians of {len(finals)}; float32's spread {noise:.3f})",
                gap <= noise,
            )
        )
    return rows


def _seconds(value):
    return "not reached" if value is None else f"{value:.1f} s"


def throughput_table(by_config, params, fit, cluster):
    """Steps/s, bytes on the ps's link and the model's prediction, one row per config."""
    summary = summarize_throughput(by_config)
    local = summary["local"][0]
    lines = [
        "| configuration | steps/s per worker (median) | min | max | x local | x async "
        "| x async, per round | MB on the ps's link per local step | payload (theory) "
        "| model steps/s | CPU share: workers, ps |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    asynchronous = summary.get("async", (None,))[0]
    for config, (median, low, high) in summary.items():
        runs = by_config[config]
        link = statistics.median(shaped.link_bytes_per_step(run) for run in runs) / 1e6
        theory = theory_bytes(config.removesuffix("-overlap"), params) or 0.0
        predicted = 1.0 / cost_model.step_time(config, 1.0 / local, 4.0 * params, cluster, fit)
        per_round = per_round_ratio(by_config, config, "async")
        lines.append(
            f"| {config} | {median:.2f} | {low:.2f} | {high:.2f} | {median / local:.2f} | "
            f"{median / asynchronous:.2f} | {per_round:.2f} | {link:.2f} | "
            f"{theory / 1e6:.2f} | {predicted:.2f} | {_cpu_shares(runs)} |"
        )
    return "\n".join(lines)


def _cpu_shares(runs):
    """Median CPU seconds per second of the window of each worker, then of the ps."""
    if not all("cpu_share" in run for run in runs):
        return "-"
    tasks = sorted(runs[0]["cpu_share"], key=lambda task: (task.startswith("ps"), task))
    return ", ".join(
        f"{statistics.median(run['cpu_share'][task] for run in runs):.2f}" for task in tasks
    )


def prediction_table(compute_secs, params, fit, rate):
    """Predicted steps/s per worker at `rate` bits/s for PREDICTED_WORKERS and _PS."""
    header = " | ".join(f"W={w}" for w in PREDICTED_WORKERS)
    lines = [
        f"| algorithm | ps tasks | {header} | a worker slows below 0.9 x at W = |",
        "|---|---:|" + "---:|" * len(PREDICTED_WORKERS) + "---:|",
    ]
    for config in PREDICTED_CONFIGS:
        for ps_tasks in PREDICTED_PS:
            cells = []
            for workers in PREDICTED_WORKERS:
                cluster = cost_model.Cluster(rate, workers, ps_tasks, ps_cores=PREDICTED_PS_CORES)
                step = cost_model.step_time(config, compute_secs, 4.0 * params, cluster, fit)
                cells.append(f"{1.0 / step:.1f}")
            one = cost_model.Cluster(rate, 1, ps_tasks, ps_cores=PREDICTED_PS_CORES)
            limit = cost_model.scaling_limit(config, compute_secs, 4.0 * params, one, fit)
            lines.append(
                f"| {config} | {ps_tasks} | {' | '.join(cells)} | "
                f"{'beyond 100,000' if limit is None else f'{limit:,}'} |"
            )
    return "\n".join(lines)


def render(results, plots, pinned=()):
    """The Markdown of sections 5 and 6; `pinned`, the lines of the pinned section, goes
    after the throughput tables."""
    shaped_results = results.get("shaped")
    out = ["## 5. A shaped network: each task a host, its link rate-limited", ""]
    if shaped_results is None or "rates" not in shaped_results:
        reason = (shaped_results or {}).get("skipped", "not run")
        return [*out, f"Skipped: {reason}.", ""]
    model = shaped_results["model"]
    params = results["models"][model]["params"]
    workers = shaped_results["workers"]
    fit = fitted(results, params)
    out += [_STATIC_SHAPED.format(workers=workers), ""]
    for rate, measured in shaped_results["rates"].items():
        rounds = len(next(iter(measured["throughput"].values())))
        network = _box(results, rate, workers)
        out += [
            f"**{rate_text(rate)} per task**, {model} ({params:,} parameters, "
            f"{4 * params / 1e6:.1f} MB), 1 ps + {workers} workers, {rounds} interleaved rounds:",
            "",
            throughput_table(measured["throughput"], params, fit, network),
            "",
        ]
    if "shaped_throughput" in plots:
        out += [f"![steps/s against bandwidth]({plots['shaped_throughput']})", ""]
    out += list(pinned)
    first = next(iter(shaped_results["rates"]))
    target = results["accuracy_target"]
    for rate, measured in shaped_results["rates"].items():
        if "accuracy" not in measured:
            continue
        out += [
            f"Time to accuracy at {rate_text(rate)} per task (digits, as section 3; "
            + _ACCURACY_INTRO.get(rate, "")
            + "):",
            "",
            accuracy_table(accuracy_summary(measured["accuracy"], target), target),
            "",
        ]
        if rate == first and "shaped_accuracy" in plots:
            out += [f"![accuracy against wall time]({plots['shaped_accuracy']})", ""]
    local = summarize_throughput(shaped_results["rates"][first]["throughput"])["local"][0]
    out += [
        "## 6. A cost model, and larger clusters",
        "",
        _model_text(fit, 1e3 / local),
        "",
    ]
    for rate in PREDICTED_RATES:
        out += [
            f"Predicted steps/s per worker at {rate / 1e9:g} Gbit/s per task ({model}, "
            f"{1e3 / local:.1f} ms of compute per step):",
            "",
            prediction_table(1.0 / local, params, fit, rate),
            "",
        ]
    return out


def plot_throughput(results, path):
    """Steps/s per worker against each task's bandwidth: measured medians, model lines."""
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    shaped_results = results["shaped"]
    params = results["models"][shaped_results["model"]]["params"]
    fit = fitted(results, params)
    workers = shaped_results["workers"]
    rates = list(shaped_results["rates"])
    summaries = {r: summarize_throughput(shaped_results["rates"][r]["throughput"]) for r in rates}
    compute = 1.0 / statistics.median(summaries[r]["local"][0] for r in rates)
    grid = np.geomspace(5e7, 3e10, 60)
    figure, axis = plt.subplots(figsize=(7.5, 4.6))
    for index, config in enumerate(summaries[rates[0]]):
        color = plt.cm.tab10(index % 10)
        xs = [rate_bits_per_sec(r) for r in rates if config in summaries[r]]
        ys = [summaries[r][config][0] for r in rates if config in summaries[r]]
        axis.plot(xs, ys, "o", color=color, label=config)
        model = [
            1.0
            / cost_model.step_time(
                config, compute, 4.0 * params, _box(results, f"{bits:.0f}bit", workers), fit
            )
            for bits in grid
        ]
        axis.plot(grid, model, "-", color=color, alpha=0.5, linewidth=1)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("bandwidth of each task's link (bit/s)")
    axis.set_ylabel("steps/s per worker")
    axis.set_title(f"1 ps + {workers} workers: measured (dots), cost model (lines)")
    axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)


def plot_accuracy(results, path):
    """Test accuracy of the shared model against wall time at the first rate."""
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    first = next(iter(results["shaped"]["rates"]))
    accuracy = results["shaped"]["rates"][first]["accuracy"]
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for index, (config, runs) in enumerate(accuracy.items()):
        for repeat, run in enumerate(runs):
            axis.plot(
                [point[0] for point in run["curve"]],
                [point[1] for point in run["curve"]],
                color=plt.cm.tab10(index % 10),
                alpha=0.8,
                label=f"{config} ({len(run['steps'])} w)" if repeat == 0 else None,
            )
    axis.axhline(results["accuracy_target"], color="#2ca02c", linestyle="--", linewidth=1)
    axis.set_ylim(0.5, 1.0)
    axis.set_xlabel("wall time (s)")
    axis.set_ylabel("test accuracy of the shared model")
    axis.set_title(f"Digits at {rate_text(first)} per task")
    axis.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)


_ACCURACY_INTRO = {
    "1gbit": (
        f"`{shaped.EASGD_DEFAULTS}` is the library's defaults, contrib's; `{shaped.EASGD_TRAIN}` "
        "easgd-train's in task mode: the paper's moving rate 0.9 / W, rho 0, overlap, a "
        f"bfloat16 wire; `{shaped.EASGD_TRAIN_FLOAT32}` the same at full width"
    ),
    "100mbit": (
        "the 16-bit wire against float32, each with the paper's moving rate, overlapped, "
        "at period 64"
    ),
}

_STATIC_SHAPED = """\
Each task runs on a host of its own: a Linux network namespace whose one link to a
private switch (a bridge in another namespace) is limited to the rate in both directions
with a `tc` token bucket filter, as a network card of that speed would be. The parameter
server's link is then shared by every worker, as on a real cluster. Nothing else differs
from section 1 (TF1 mode, fixed batch, {workers} workers, configurations interleaved);
`easgd-10-overlap` is `easgd-10` with `overlap=True` (docs/DESIGN.md, "The overlapped
exchange"). A worker's rate is its steps over the time from the window's start to the end
of its last step in it, exact also when a step takes seconds. "MB on the ps's link" counts
what the ps's interface sent and received in the window (frames included) over the local
steps of all workers; "payload" is what the algorithm must move. Each worker has about one
of this machine's two cores, and the ps shares them; with 4 workers each would have half a
core, which would measure the CPU rather than the network, so this machine measures 2 and
the cost model (section 6) goes beyond. `--workers` sets another count."""


def _model_text(fit, compute_ms):
    """Section 6's explanation, with the costs used and the fitted link efficiency."""
    _, commit = measured_costs()
    where = (
        f"measured by `make bench-scale` at commit {commit} (processes that leave the C "
        "allocator as it is, as these do)"
        if commit
        else "not measured (benchmarks/results/scale.json is missing: the model counts no CPU)"
    )
    return _STATIC_MODEL.format(
        worker=fit.worker_byte_secs * 1e9, ps=fit.ps_byte_secs * 1e9, where=where,
        e=fit.link_efficiency, compute=compute_ms, cores=PREDICTED_PS_CORES,
    )  # fmt: skip


_STATIC_MODEL = """\
`benchmarks/cost_model.py` predicts a worker's local step from its compute c (`local`), the
bytes an exchange moves each way (the model's, for async SGD every step and for EASGD every
tau steps), the CPU an exchange costs the worker and the parameter server per byte, and each
link's payload bandwidth e x rate / 8, as a closed queueing network: docs/SCALING.md
describes it and checks it against 2 to 64 workers. Here the CPU costs are {worker:.2f} ns
per byte moved on the worker and {ps:.2f} ns per byte served on the ps, {where}; the tasks
and the workers' compute share this machine's cores, and the fit on the runs of section 5
(least squares of log step times) gives the link efficiency e = {e:.2f}; the "model steps/s"
columns above show it. `sync` waits for every worker's transfer: c + an exchange's CPU +
max(b / bw, W b / (P bw)). Below, the same model with c = {compute:.1f} ms (one core of this
machine per worker), each task on a machine of its own (a ps task with {cores} cores): where a
worker's steps/s falls below 0.9 x its speed alone, its algorithm has stopped scaling. The
ps tasks share the centre (and so the fan-in) evenly. On these shared cores the overlapped
exchange's CPU still takes cycles from the compute, which the model now counts (its
prediction is no longer an upper bound); with a machine per task only its transfer hides
behind the next tau steps. How many ps tasks a cluster needs: docs/SCALING.md, "The rule"."""
