"""Sections 5 and 6 of BENCHMARKS.md: the shaped network, and the cost model beyond it.

From `shaped.shaped_section`'s results: the targets, a throughput table per link rate,
time to accuracy at the first rate, the cost model fitted on those runs (predicted against
measured), its predictions for larger clusters, and the two plots.
"""

import statistics

from benchmarks import cost_model, shaped
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

#: The larger clusters the cost model predicts: link rates (bits/s), ps tasks, workers.
PREDICTED_RATES = (10e9, 25e9)
PREDICTED_PS = (1, 4)
PREDICTED_WORKERS = (8, 64, 256)
PREDICTED_CONFIGS = ("async", "sync", "easgd-10", "easgd-64", "easgd-10-overlap")


def rate_text(rate):
    """ "1gbit" -> "1 Gbit/s"."""
    bits = rate_bits_per_sec(rate)
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


def _measurements(shaped_results, model_bytes):
    """(config, compute secs, Network, measured secs per step) of every shaped median."""
    rows = []
    for rate, measured in shaped_results["rates"].items():
        summary = summarize_throughput(measured["throughput"])
        compute = 1.0 / summary["local"][0]
        network = cost_model.Network(rate_bits_per_sec(rate), shaped_results["workers"])
        rows += [
            (config, compute, network, 1.0 / median)
            for config, (median, _, _) in summary.items()
            if config != "local" and median > 0
        ]
    return rows


def fitted(shaped_results, params):
    """The cost model's `Fit` on the shaped runs."""
    model_bytes = 4.0 * params
    return cost_model.fit(_measurements(shaped_results, model_bytes), model_bytes)


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
            for config, reference, goal in (("easgd-10", "async", 5.0), ("easgd-10", "local", 0.6)):
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


def throughput_table(by_config, params, fit, network):
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
        predicted = 1.0 / cost_model.step_time(config, 1.0 / local, 4.0 * params, network, fit)
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
                network = cost_model.Network(rate, workers, ps_tasks)
                step = cost_model.step_time(config, compute_secs, 4.0 * params, network, fit)
                cells.append(f"{1.0 / step:.1f}")
            limit = cost_model.scaling_limit(
                config, compute_secs, 4.0 * params, cost_model.Network(rate, 1, ps_tasks), fit
            )
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
    fit = fitted(shaped_results, params)
    out += [_STATIC_SHAPED.format(workers=workers), ""]
    for rate, measured in shaped_results["rates"].items():
        rounds = len(next(iter(measured["throughput"].values())))
        network = cost_model.Network(rate_bits_per_sec(rate), workers)
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
        _STATIC_MODEL.format(
            k=fit.cpu_secs_per_byte * 1e9, e=fit.link_efficiency, compute=1e3 / local
        ),
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
    fit = fitted(shaped_results, params)
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
                config, compute, 4.0 * params, cost_model.Network(bits, workers), fit
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

_STATIC_MODEL = """\
`benchmarks/cost_model.py` predicts the time of a local step from the compute time c
(`local`), the model's bytes B, the bytes b a worker moves per step (2B for async and
sync, 2B/tau for EASGD), each link's payload bandwidth e x rate / 8, the ps's fan-in (W
workers on P ps links, full duplex) and k, the CPU time a worker spends per byte moved:

- async and `easgd-tau`: max(c + k b + b / bw, W b / (2 P bw)), the second term the ps's
  link full;
- `easgd-tau-overlap`: max(c + k b, b / bw, W b / (2 P bw)), transfers hidden behind the
  next tau steps;
- sync: c + k b + max(b / bw, W b / (P bw)), everyone sending, then reading, at once.

Fitted on the runs of section 5 (least squares of log step times): k = {k:.2f} ns per byte,
e = {e:.2f}; the "model steps/s" columns above show the fit. Below, the same model with
c = {compute:.1f} ms (one core of this machine per worker) for larger clusters: where a
worker's steps/s falls below 0.9 x its speed alone, its algorithm has stopped scaling.
The ps tasks are assumed to share the centre (and so the fan-in) evenly. The fit is
poorest where transfers run beside the compute (`easgd-10-overlap`): on these two shared
cores the kernel's and TensorFlow's per-byte work then takes cycles from the workers'
compute, where without overlap it fills a worker's idle wait; one k cannot tell the two
apart, so on separate machines the overlap's prediction is the closer one, and here it is an
upper bound."""
