"""Tables, PNG plots and the Markdown report from the results of `run.py`.

    python -m benchmarks.report benchmarks/results/results.json BENCHMARKS.md

re-renders a report from saved results without measuring again.
"""

import json
import pathlib
import statistics
import sys

BYTES_PER_FLOAT = 4
PLOT_DPI = 110


def first_time_at(curve, target):
    """Seconds until the curve first reaches `target`, or None."""
    for seconds, accuracy, _ in curve:
        if accuracy >= target:
            return seconds
    return None


def per_round(runs):
    """Steps/s per worker of each round: the mean over the workers of that round."""
    return [statistics.fmean(run["per_worker"]) for run in runs]


def summarize_throughput(by_config):
    """{config: (median, min, max)} of the per-round steps/s per worker."""
    summary = {}
    for config, runs in by_config.items():
        values = per_round(runs)
        summary[config] = (statistics.median(values), min(values), max(values))
    return summary


def per_round_ratio(by_config, config, reference):
    """Median over rounds of config / reference within the same round (drift cancels)."""
    if config not in by_config or reference not in by_config:
        return None
    pairs = zip(per_round(by_config[config]), per_round(by_config[reference]), strict=True)
    return statistics.median(value / base for value, base in pairs)


def theory_bytes(config, params, window=None):
    """Bytes per local step the algorithm must move (payload only), or None if unknown.

    Args:
        config: configuration name.
        params: number of float32 parameters.
        window: optional (warm-up steps, counted steps): EASGD then counts the exchanges
            that actually fall into the counted steps (steps warm+1 .. warm+counted).
    """
    payload = 2 * params * BYTES_PER_FLOAT
    if config == "local":
        return 0.0
    if config in ("async", "sync"):
        return float(payload)  # Read every variable, send every gradient.
    if "easgd-" in config:
        period = int(config.split("easgd-", 1)[1].split("-", 1)[0])
        if window is None:
            return payload / period  # Send x, receive the centre, once per period.
        warm, counted = window
        exchanges = (warm + counted) // period - warm // period
        return payload * exchanges / counted
    return None


def _ratio(value, reference):
    return f"{value / reference:.2f}" if reference else "-"


def throughput_table(by_config):
    summary = summarize_throughput(by_config)
    local = summary.get("local", (None,))[0]
    asynchronous = summary.get("async", (None,))[0]
    lines = [
        "| configuration | steps/s per worker (median) | min | max | x local-only | x async "
        "| x local-only, per round | x async, per round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for config, (median, low, high) in summary.items():
        in_round = [per_round_ratio(by_config, config, ref) for ref in ("local", "async")]
        in_round = [f"{r:.2f}" if r is not None else "-" for r in in_round]
        lines.append(
            f"| {config} | {median:.1f} | {low:.1f} | {high:.1f} | {_ratio(median, local)} "
            f"| {_ratio(median, asynchronous)} | {in_round[0]} | {in_round[1]} |"
        )
    return "\n".join(lines)


def bytes_table(by_config, params, window):
    baseline = by_config.get("local", 0.0)
    lines = [
        "| configuration | measured MB per local step | minus local-only | theory "
        "(2 x params x 4 B x exchanges / steps) | (measured - local) / theory |",
        "|---|---:|---:|---:|---:|",
    ]
    for config, measured in by_config.items():
        net = measured - baseline
        theory = theory_bytes(config, params, window)
        ratio = f"{net / theory:.3f}" if theory else "-"
        theory_text = f"{theory / 1e6:.3f}" if theory is not None else "-"
        lines.append(
            f"| {config} | {measured / 1e6:.3f} | {net / 1e6:.3f} | {theory_text} | {ratio} |"
        )
    return "\n".join(lines)


def accuracy_summary(by_config, target):
    """{config: (times to target per repeat (None: not reached), final accuracies, steps)}."""
    summary = {}
    for config, runs in by_config.items():
        times = [first_time_at(run["curve"], target) for run in runs]
        finals = [run["curve"][-1][1] for run in runs]
        steps = [statistics.fmean(run["steps"]) for run in runs]
        summary[config] = (times, finals, steps, len(runs[0]["steps"]))
    return summary


def _median_time(times):
    """Median time to target, counting a run that never reached it as infinitely slow."""
    ordered = sorted(times, key=lambda t: float("inf") if t is None else t)
    middle = ordered[len(ordered) // 2] if len(ordered) % 2 else None
    if len(ordered) % 2 == 0:
        low, high = ordered[len(ordered) // 2 - 1], ordered[len(ordered) // 2]
        middle = None if low is None or high is None else (low + high) / 2
    return middle


def accuracy_table(summary, target):
    lines = [
        f"| configuration | workers | seconds to {target:.0%} test accuracy (each run) | median "
        "| final accuracy (median) | local steps per worker (median) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for config, (times, finals, steps, workers) in summary.items():
        each = ", ".join("not reached" if t is None else f"{t:.1f}" for t in times)
        median = _median_time(times)
        median_text = "not reached" if median is None else f"{median:.1f}"
        lines.append(
            f"| {config} | {workers} | {each} | {median_text} | "
            f"{statistics.median(finals):.3f} | {statistics.median(steps):.0f} |"
        )
    return "\n".join(lines)


def overhead_table(by_world):
    lines = [
        "| world | model | SGD ms/step | EASGD ms/step (no exchange) | overhead | per step "
        "| SGD + empty cond ms/step | its overhead |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for world, by_model in by_world.items():
        for model, answer in by_model.items():
            medians = answer["median_secs_per_step"]
            sgd, easgd, cond = medians["sgd"], medians["easgd"], medians.get("cond")
            cond_cells = f"{cond * 1e3:.3f} | {(cond / sgd - 1) * 100:+.1f} %" if cond else "- | -"
            lines.append(
                f"| {world} | {model} | {sgd * 1e3:.3f} | {easgd * 1e3:.3f} | "
                f"{(easgd / sgd - 1) * 100:+.1f} % | {(easgd - sgd) * 1e6:+.0f} us | {cond_cells} |"
            )
    return "\n".join(lines)


def plot_throughput(results, path):
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    panels = [(f"{m} (TF1 mode)", runs) for m, runs in results["throughput"].items()]
    panels += [(f"{m} (TF2 graph mode)", r) for m, r in results.get("throughput_tf2", {}).items()]
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for axis, (title, by_config) in zip(axes[0], panels, strict=True):
        summary = summarize_throughput(by_config)
        names = list(summary)
        medians = [summary[n][0] for n in names]
        errors = [
            [summary[n][0] - summary[n][1] for n in names],
            [summary[n][2] - summary[n][0] for n in names],
        ]
        colors = [
            "#888888" if n == "local" else "#d62728" if n in ("async", "sync") else "#1f77b4"
            for n in names
        ]
        colors = [
            "#ff7f0e" if n.startswith("naive") else "#9edae5" if n.startswith("copy") else c
            for n, c in zip(names, colors, strict=True)
        ]
        axis.bar(names, medians, yerr=errors, color=colors, capsize=3)
        local = summary.get("local", (None,))[0]
        if local:
            axis.axhline(local, color="#444444", linestyle=":", linewidth=1)
            axis.axhline(0.9 * local, color="#2ca02c", linestyle="--", linewidth=1)
            for x, value in enumerate(medians):
                axis.text(x, value, f"{value / local:.2f}x", ha="center", va="bottom", fontsize=7)
        axis.set_title(title, fontsize=9)
        axis.set_ylabel("steps/s per worker (median, min-max)")
        axis.tick_params(axis="x", rotation=45, labelsize=8)
    figure.suptitle("Worker throughput; dotted: local-only ceiling, dashed: 0.9 x ceiling")
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)


def plot_accuracy(results, path):
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    colors = {
        "easgd-10-alpha0.45": "#1f77b4",
        "easgd-10": "#17becf",
        "async": "#d62728",
        "local": "#888888",
    }
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for config, runs in results["accuracy"].items():
        for index, run in enumerate(runs):
            seconds = [point[0] for point in run["curve"]]
            accuracy = [point[1] for point in run["curve"]]
            workers = len(run["steps"])
            label = f"{config} ({workers} worker{'s' if workers > 1 else ''})"
            axis.plot(
                seconds,
                accuracy,
                color=colors.get(config),
                alpha=0.8,
                label=label if index == 0 else None,
            )
    axis.axhline(results["accuracy_target"], color="#2ca02c", linestyle="--", linewidth=1)
    axis.set_ylim(0.5, 1.0)
    axis.set_xlabel("wall time (s)")
    axis.set_ylabel("test accuracy of the shared model")
    axis.set_title("Digits: centre (EASGD), ps variables (async) or own variables (single)")
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)


def targets(results):
    """The issue's targets as rows (target, measured, met?)."""
    rows = []
    model = next(iter(results.get("throughput", {})), None)
    if model:
        summary = summarize_throughput(results["throughput"][model])
        easgd = summary.get("easgd-10", (None,))[0]
        local = summary.get("local", (None,))[0]
        asynchronous = summary.get("async", (None,))[0]
        by_config = results["throughput"][model]
        for reference, goal, label in (
            (local, 0.9, "local-only"),
            (asynchronous, 1.5, "async SGD"),
        ):
            if not (easgd and reference):
                continue
            ratio = easgd / reference
            in_round = per_round_ratio(by_config, "easgd-10", "local" if goal < 1 else "async")
            measured = (
                f"{ratio:.2f} x (ratio of medians); {in_round:.2f} x (median of per-round ratios)"
            )
            floor = summary.get("copy-easgd-10", (None,))[0]
            if goal < 1 and floor:
                measured += (
                    f"; the copy-only exchange, its floor: {floor / reference:.2f} x "
                    f"(`copy-easgd-10`)"
                )
            rows.append((f"EASGD tau=10 >= {goal} x {label} ({model})", measured, ratio >= goal))
    for world, by_model in results.get("overhead", {}).items():
        for overhead_model, answer in by_model.items():
            medians = answer["median_secs_per_step"]
            overhead = medians["easgd"] / medians["sgd"] - 1
            extra_us = (medians["easgd"] - medians["sgd"]) * 1e6
            rows.append(
                (
                    f"overhead on non-exchange steps <= 5 % ({world}, {overhead_model})",
                    f"{overhead * 100:+.1f} % ({extra_us:+.0f} us per step)",
                    overhead <= 0.05,
                )
            )
    if "bytes" in results:
        params = results["models"][model]["params"] if model else None
        by_config = results["bytes"]
        baseline = by_config.get("local", 0.0)
        ratios = {
            config: (value - baseline) / theory_bytes(config, params, _window(results))
            for config, value in by_config.items()
            if config.startswith("easgd-")
        }
        worst = max(ratios.items(), key=lambda item: abs(item[1] - 1))
        rows.append(
            (
                "EASGD bytes per local step within 10 % of theory (every period)",
                "; ".join(f"{c}: {r:.3f}" for c, r in ratios.items()),
                abs(worst[1] - 1) <= 0.10,
            )
        )
    elif results.get("netns_skip_reason"):
        rows.append(("EASGD bytes within 10 % of theory", "skipped", None))
    if "accuracy" in results:
        summary = accuracy_summary(results["accuracy"], results["accuracy_target"])
        asynchronous = _median_time(summary["async"][0]) if "async" in summary else None
        for config in (c for c in summary if c.startswith("easgd-")):
            easgd = _median_time(summary[config][0])
            text = f"{config} {_seconds(easgd)}, async {_seconds(asynchronous)} (medians)"
            met = easgd is not None and (asynchronous is None or easgd <= asynchronous)
            rows.append((f"time to accuracy: {config} no slower than async SGD", text, met))
    return rows


def _window(results):
    window = results.get("bytes_window")
    return (window["warm_steps"], window["steps"]) if window else None


def _seconds(value):
    return "not reached" if value is None else f"{value:.1f} s"


def _met(flag):
    return "skipped" if flag is None else "**met**" if flag else "**not met**"


#: The contrib section's rows: (side, configuration, its local-only reference).
CONTRIB_ROWS = (
    ("contrib", "local", "local"),
    ("contrib", "contrib-easgd-10", "local"),
    ("package", "local", "local"),
    ("package", "easgd-10", "local"),
)


def contrib_ratio_of_ratios(section):
    """(easgd-10 / local of the package) / (contrib-easgd-10 / local of contrib).

    Returns:
        (ratio of the medians' ratios, median over rounds of the rounds' ratios), or None
        when a configuration is missing.
    """
    runs = section["runs"]
    try:
        ours, our_local = runs["package"]["easgd-10"], runs["package"]["local"]
        theirs, their_local = runs["contrib"]["contrib-easgd-10"], runs["contrib"]["local"]
    except KeyError:
        return None
    medians = [statistics.median(per_round(r)) for r in (ours, our_local, theirs, their_local)]
    of_medians = (medians[0] / medians[1]) / (medians[2] / medians[3])
    rounds = zip(
        per_round(ours),
        per_round(our_local),
        per_round(theirs),
        per_round(their_local),
        strict=True,
    )
    in_round = statistics.median((a / b) / (c / d) for a, b, c, d in rounds)
    return of_medians, in_round


def contrib_table(section):
    versions = section["versions"]
    lines = [
        "| TensorFlow | configuration | steps/s per worker (median) | min | max "
        "| x local-only (same TensorFlow) | x local-only, per round "
        "| ms per local step over local-only |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, config, reference in CONTRIB_ROWS:
        by_config = section["runs"].get(side, {})
        if config not in by_config:
            continue
        median, low, high = summarize_throughput(by_config)[config]
        base = summarize_throughput(by_config)[reference][0]
        in_round = per_round_ratio(by_config, config, reference)
        extra_ms = (1 / median - 1 / base) * 1e3
        lines.append(
            f"| {versions[side]['tensorflow']} ({side}) | {config} | {median:.1f} | {low:.1f} "
            f"| {high:.1f} | {_ratio(median, base)} | {in_round:.2f} | {extra_ms:+.1f} |"
        )
    return "\n".join(lines)


def _revision_text(revision, limit=6):
    """ "commit X", and the files of the benchmarked code that differed from it, if any."""
    text = f"commit {revision['commit']}"
    changed = revision.get("changed") or []
    if changed:
        shown = ", ".join(f"`{name}`" for name in changed[:limit])
        more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
        text += f" with uncommitted changes to {shown}{more}"
    return text


def _separate_run(results, section):
    """Whether a section's own "run" is not the run of the report's header."""
    run = section.get("run", {})
    return (run.get("command"), run.get("date")) != (results["command"], results["date"])


def contrib_part(results):
    """The contrib section's lines, within section 1."""
    section = results["contrib"]
    run = section["run"]
    out = ["### Side by side with contrib on TensorFlow 1.15", ""]
    if "skipped" in section:
        return [*out, f"Skipped: {section['skipped']}.", ""]
    versions = section["versions"]
    theirs = f"{versions['contrib']['tensorflow']} (Python {versions['contrib']['python']})"
    ours = f"{versions['package']['tensorflow']} (Python {versions['package']['python']})"
    load = "; after: ".join(
        ", ".join(f"{x:.2f}" for x in run[key]) for key in ("load_before", "load_after")
    )
    where = (
        "a run of its own, not the run of the header"
        if _separate_run(results, section)
        else "the run of the header"
    )
    out += [
        _STATIC_CONTRIB,
        "",
        f"Measured in {where}: `{run['command']}` at {_revision_text(run['revision'])}; "
        f"{run['date']}, {run['duration_secs'] / 60:.1f} min"
        + (" (quick smoke run)" if run.get("quick") else "")
        + f"; load average (1, 5, 15 min) before: {load}. TensorFlow {theirs} with "
        f"`tf.contrib` against TensorFlow {ours}.",
        "",
    ]
    prints = section["fingerprints"]
    first = prints["contrib"]["local"][0]
    losses = {
        side: sorted({f"{p['loss']:.6f}" for by in prints[side].values() for p in by[:1]})
        for side in ("contrib", "package")
    }
    idle = section.get("idle_cpu_per_sec")
    if idle is not None:
        out += [
            f"The waiting cluster's processes used {idle * 1e3:.1f} ms of CPU per second of "
            "the other's windows (warm-up and measured window).",
            "",
        ]
    out += [
        f"The same start on both sides, checked before the window of every build: each "
        f"worker's {first['variables']} variables (names, shapes, initial values) and its batch "
        f"had the same SHA-256 digests under both TensorFlows (worker 0: parameters "
        f"`{first['params'][:12]}`, batch `{first['batch'][:12]}`), and worker 0's loss on it "
        f"was {' / '.join(losses['contrib'])} under {versions['contrib']['tensorflow']} and "
        f"{' / '.join(losses['package'])} under {versions['package']['tensorflow']}.",
        "",
    ]
    rounds = len(next(iter(section["runs"]["contrib"].values())))
    out += [
        f"**{section['model']}** ({results['models'][section['model']]['params']:,} "
        f"parameters, batch {results['models'][section['model']]['batch']}), TF1 mode (ref "
        f"variables) on both sides, {rounds} interleaved rounds:",
        "",
        contrib_table(section),
        "",
    ]
    ratios = contrib_ratio_of_ratios(section)
    if ratios:
        out += [
            f"Ratio of ratios, (`easgd-10` / `local`, TensorFlow "
            f"{versions['package']['tensorflow']}) / (`contrib-easgd-10` / `local`, TensorFlow "
            f"{versions['contrib']['tensorflow']}): **{ratios[0]:.2f}** (ratio of the medians' "
            f"ratios); {ratios[1]:.2f} (median of the rounds' ratios of ratios).",
            "",
        ]
    return out


def render(results, plots):
    """The Markdown report."""
    machine = results["machine"]
    load_before = ", ".join(f"{x:.2f}" for x in results["load_before"])
    load_after = ", ".join(f"{x:.2f}" for x in results.get("load_after", []))
    separate = "contrib" in results and _separate_run(results, results["contrib"])
    out = [
        "# Benchmarks",
        "",
        "Generated by `benchmarks/run.py` (`make bench`); re-render from saved results with "
        "`python -m benchmarks.report RESULTS_JSON REPORT_MD`. Every number below comes from "
        "the one run described here"
        + (
            ", except those of section 1's side by side with contrib, which names its own run."
            if separate
            else "."
        ),
        "",
        f"- Command: `{results['command']}`" + (" (quick smoke run)" if results["quick"] else ""),
    ]
    if "revision" in results:
        out.append(f"- Code: {_revision_text(results['revision'])}")
    out += [
        f"- Date: {results['date']}; duration {results.get('duration_secs', 0) / 60:.0f} min",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory']}; "
        f"{machine['os']}; Python {machine['python']}, TensorFlow {machine['tensorflow']}",
        f"- Load average (1, 5, 15 min) before: {load_before}; after: {load_after} (the "
        "run's own ps, workers and driver count in the latter). Compare ratios within a "
        "table, not across runs.",
        f"- Cluster: 1 ps + {results['workers']} workers, each a separate OS process, "
        "talking gRPC over loopback"
        + (
            ", all inside a private network namespace made for the run."
            if results["netns"]
            else "."
        ),
        "",
        "## Targets",
        "",
        "| target | measured | status |",
        "|---|---|---|",
    ]
    cores = machine["cores"] or 1
    # The run itself keeps 3-4 processes busy, so only the load before it tells whether
    # other jobs were running.
    overloaded = results["load_before"][0] > cores
    for target, measured, flag in targets(results):
        status = _met(flag)
        if overloaded and "steps" not in target and target.startswith("EASGD tau"):
            status += " in this run, but not reliable: the machine was overloaded"
        out.append(f"| {target} | {measured} | {status} |")
    if overloaded:
        out += [
            "",
            f"**Warning: the machine was overloaded during this run** (load average above its "
            f"{cores} cores: other engineers' test suites were running). Absolute steps/s, and "
            "even the order of close configurations, then mostly measure the other jobs: read "
            "the per-round ratios and the min-max spread, and trust the byte counts, which do "
            "not depend on load.",
        ]
    out += ["", _STATIC_SETUP]
    if "throughput" in results:
        out += ["", "## 1. Worker throughput", "", _STATIC_THROUGHPUT, ""]
        for model, by_config in results["throughput"].items():
            info = results["models"][model]
            rounds = len(next(iter(by_config.values())))
            out += [
                f"**{model}** ({info['params']:,} parameters, batch {info['batch']}), TF1 mode "
                f"(ref variables), {rounds} interleaved rounds:",
                "",
                throughput_table(by_config),
                "",
            ]
        for model, by_config in results.get("throughput_tf2", {}).items():
            rounds = len(next(iter(by_config.values())))
            out += [
                f"**{model}**, TF2 graph mode (resource variables, control flow v2), "
                f"{rounds} interleaved rounds:",
                "",
                throughput_table(by_config),
                "",
            ]
        if "throughput" in plots:
            out += [f"![throughput]({plots['throughput']})", ""]
    if "contrib" in results:
        if "throughput" not in results:
            out += ["", "## 1. Worker throughput", ""]
        out += contrib_part(results)
    out += ["## 2. Bytes on the wire per local step", ""]
    if "bytes" in results:
        model = next(iter(results["throughput"])) if "throughput" in results else "mlp-2.9M"
        params = results["models"][model]["params"]
        out += [
            _STATIC_BYTES,
            "",
            f"**{model}** ({params:,} parameters), one worker, TF1 mode:",
            "",
            bytes_table(results["bytes"], params, _window(results)),
            "",
        ]
    else:
        out += [f"Skipped: {results.get('netns_skip_reason') or 'not run'}.", ""]
    if "accuracy" in results:
        target = results["accuracy_target"]
        out += [
            "## 3. Time to accuracy",
            "",
            _STATIC_ACCURACY,
            "",
            accuracy_table(accuracy_summary(results["accuracy"], target), target),
            "",
        ]
        if "accuracy" in plots:
            out += [f"![learning curves]({plots['accuracy']})", ""]
        out += [
            "How to choose the period, the moving rate and rho, from a grid measured on this "
            "set-up (`make bench-tuning`): [docs/TUNING.md](docs/TUNING.md).",
            "",
        ]
    if "overhead" in results:
        out += [
            "## 4. Per-step overhead",
            "",
            _STATIC_OVERHEAD,
            "",
            overhead_table(results["overhead"]),
            "",
        ]
    out += [_STATIC_DESIGN]
    return "\n".join(out) + "\n"


def write(results, out, report_path, replot=True):
    """Writes the plots into `out` and the report to `report_path`.

    With `replot=False`, a plot already in `out` is kept as it is (its figures have not
    changed: run.py --merge).
    """
    out = pathlib.Path(out)
    report_path = pathlib.Path(report_path)
    plots = {}
    for name, plot in (("throughput", plot_throughput), ("accuracy", plot_accuracy)):
        if name in results:
            if replot or not (out / f"{name}.png").is_file():
                plot(results, out / f"{name}.png")
            plots[name] = _relative(out / f"{name}.png", report_path.parent)
    report_path.write_text(render(results, plots))


def _relative(path, base):
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path.resolve())


_STATIC_SETUP = """\
Configurations: `local` = workers with their own variables and no ps (the ceiling);
`async` = TF1 between-graph replication with the variables on the ps, plain SGD (DOWNPOUR);
`sync` = the same with `SyncReplicasOptimizer` aggregating every worker's gradient;
`easgd-P` = `ElasticAverageOptimizer(GradientDescentOptimizer)` with communication period P,
`rho=0`, its exchanges calling the ps directly (the `direct` transport of docs/API.md);
`easgd-P-remotecall` = the same in a session without `share_cluster_devices_in_session`,
whose exchanges go by `RemoteCall`; `naive-easgd-P` = the same algorithm with the first
exchange design (a per-step `tf.cond` whose branch has ops on the ps,
`benchmarks/naive_easgd.py`), kept for comparison; `copy-easgd-P` = `easgd-P` with an
exchange that makes the same calls and moves the same bytes but does no arithmetic (the ps
stores the worker's values, the worker stores the centres as its local centres:
`benchmarks/copy_only.py`), so no exchange of EASGD's traffic can cost less on this runtime;
it does not train. Every worker process serves its own
session (`tf.compat.v1.Session(server.target)`, device filters as in contrib fix 10, and
`share_cluster_devices_in_session=True` except in `easgd-P-remotecall`), as TF1 scripts do;
EASGD workers then run `choose_exchange_transport`, as the optimizer's hook does."""

_STATIC_THROUGHPUT = """\
Each round runs every configuration once (forward order on even rounds, backward on odd
ones), with all workers starting a fixed window together after a warm-up; a round's value
is the mean over the workers of their steps/s. Inputs are a fixed batch held on the worker,
so the only traffic is the algorithm's."""

_STATIC_CONTRIB = """\
The original `tf.contrib.opt.ElasticAverageOptimizer` runs on TensorFlow 1.15 only (the last
release with `tf.contrib`, on Python 3.7), in `.venv-tf115` (`make test-contrib` makes it),
so it runs in a cluster of its own: again 1 ps + 2 workers, separate processes on loopback
ports (in a network namespace of their own when the run has one), driven by the same harness
(`benchmarks/contrib_task.py` answers `run.py` as `benchmarks/task.py` does: the same
warm-up, the same common window, the same session `ConfigProto`). Its model is rebuilt
from the same spec by `benchmarks/models_py37.py` (Python 3.7 code: `models.py` is not),
with the same variables, initialisers and forward pass; its batches are the arrays of
`specs.synthetic_batch`, handed over in a file. Both clusters stay up for the whole
section, and each round runs the four configurations one after the other (forward order on
even rounds, backward on odd ones) while the other cluster waits idle (its CPU time during
the other's windows is measured, below).
`local` = the same model, each worker training alone (the ceiling of that build);
`contrib-easgd-10` = contrib's `ElasticAverageOptimizer(GradientDescentOptimizer)` with
period 10, the default moving rate and `rho=0`, built as `easgd-10` is (the getter inside a
`replica_device_setter`); `easgd-10` = this package's, as above. TensorFlow 1.15.5's wheel
and TensorFlow 2.x's are different builds (compiler flags, Eigen, oneDNN; on this machine
1.15.5 logs at start-up that it was not compiled for the CPU's AVX2, AVX512F and FMA), so
steps/s are not comparable across versions: each is compared with its own `local`. A
ratio still depends on how fast that build computes (the slower its steps, the less an
exchange of the same bytes weighs); the last column, the time a local step takes beyond
`local`'s (1 / steps/s, of the medians), depends on it much less (only the exchange's own
kernels and copies run on that build). Contrib's exchange is a `tf.cond` whose branch has
ops on the ps, as `naive-easgd-P`'s, and with `rho=0` it still computes its elastic
penalty (times zero) and its gradient on every step; this package leaves the penalty out
when rho is 0."""

_STATIC_BYTES = """\
Counted as the transmit bytes of the loopback interface of the private network namespace
that holds only the cluster (each byte crosses `lo` once), over 128 local steps (64 in a
quick run) of one worker after 64 warm-up steps (the first exchange, which also registers
the function with the ps, falls into the warm-up). The local-only row is a step with no
algorithm traffic (a client reaches its in-process server without an RPC); the next column
subtracts it. Theory counts payload only: async SGD reads every variable and sends every
gradient on each step; EASGD sends the worker's copy and receives the centre once per
exchange, counting the exchanges that fall into the window (13 in 128 steps at period 10:
steps 70 to 190)."""

_STATIC_ACCURACY = """\
The 8x8 digits of scikit-learn (the project's embedded dataset, its fixed split: 1442
training and 355 test images), a 64-1024-1024-1024-10 MLP (2.2 M parameters, so that
communication matters), SGD with learning rate 0.05, batch 32 per worker. Worker 0 measures
the test accuracy of the shared model every 0.5 s of wall time, in its training thread: the
EASGD centre on the ps, the ps variables of async SGD, or its own variables when it trains
alone (single worker, no ps). EASGD runs at period 10 and rho = 0, with the moving rate of
the paper (`easgd-10-alpha0.45`: beta = p x alpha = 0.9, so alpha = 0.9 / 2 workers) and
with the library's default, contrib's (`easgd-10`: 0.9 / period / workers = 0.045), which
lets the centre follow the workers ten times more slowly."""

_STATIC_OVERHEAD = """\
A plain `tf.compat.v1.Session()` with no cluster: the same model and batch trained by
`GradientDescentOptimizer` alone, by `ElasticAverageOptimizer` wrapping it with a period no
run reaches (every measured step is a step that does not exchange), and, for reference, by
`GradientDescentOptimizer` followed by the cheapest periodic check a graph can make: a step
counter and a `tf.compat.v1.cond` whose branches do nothing ("SGD + empty cond"). Each
graph keeps an offset of its own, a few per cent on the tiny model either way, and so does
each process; so each of three fresh processes per world builds three graphs of each
configuration, blocks of steps of all nine alternate, and the table gives the median time
per step over the blocks of a configuration's nine graphs. The extra work of a
non-exchange step is fixed (increment `local_step`, compare, one Switch and Merge around
the skipped exchange), so it weighs most on the tiny model; most of it is what any
conditional costs: a Switch in a graph makes TensorFlow's executor track dead tensors for
every op of the step."""

_STATIC_DESIGN = """\
## What costs, and the design of the exchange

A TF1 session prunes the graph of a `session.run` to the fetched op's inputs and splits it
into one partition per task; every partition runs on every step. The first exchange put ops
of the ps inside a `tf.cond`: the train op then had a ps partition, so every step paid a
RunGraph RPC to the ps and one RecvTensor RPC per cross-device edge (each variable's centre
and delta, dead or live), even when the cond did not exchange: RunMetadata of such a step
shows two partition graphs, the worker's and the ps's, against one with the new design, and
the byte counts show the dead tensors' cost, about 8 KB per step (`naive-easgd-10` vs
`easgd-10`). That is the `naive-easgd-P` rows.

`tf_contrib_easgd/exchange.py` removes every ps op from the train op's graph. For each ps
task holding centres it defines a function (`tf.function`, traced once) that does the ps
half of the exchange where the centres live: read each centre, `d = alpha * (x - c)`,
`c += d`, then `global_step += 1` if the step lives there, and return the centres read. The
worker's whole exchange with that task (read its values, call, set its local centres, apply
the same `d`) is one more function, called by one op placed on the worker, behind one
worker-local Switch (`run_if` in gating.py, the gating of a v1 `tf.cond` without a Switch
per captured variable). A step that does not exchange therefore runs one partition, on the
worker, and sends nothing (`tests/test_exchange.py` checks this through `RunMetadata`: one
partition graph, no ps device in the step stats), and skips a few call ops whatever the
number of variables. An exchange step calls each ps task once with the worker's values and
gets the centres back. The functions address each variable by container and shared name,
as the variable's own op does, so they work for ref variables (TF1 mode, `VariableV2`) and
resource variables (TF2 graph mode, `VarHandleOp`). Public API and results are unchanged:
the existing trajectory tests pass as they were.

The call has two transports (`tf_contrib_easgd/transport.py`), both in the graph behind a
second worker-local Switch, on whether a marker resource exists on the worker (no
variable: collections and checkpoints stay contrib's):

- `RemoteCall` (`easgd-P-remotecall`) works in every session but ships its arguments and
  results inside the RunGraph messages as protobuf tensors, which copies each tensor several
  times on both sides.
- The direct call (`easgd-P`) is a function that holds the ps half itself, its ops pinned
  to the ps task; like every exchange function it is marked `_noinline`, so that the
  session does not inline it into the step's graph (which would give every step a ps
  partition again). The worker's
  function runtime runs the ps part on the ps and moves the tensors with Send/Recv, TF's
  RecvTensor path that a ps partition uses, close to zero-copy. It needs the worker's
  session to know the ps devices, `share_cluster_devices_in_session=True`; the
  optimizer's hook reads that option from the session's `ConfigProto` after each
  session creation and, when it is set, confirms with a probe (a direct call that asks
  each ps task whether its centres are initialised); it keeps `RemoteCall` otherwise.

Known costs and limits:

- With two workers and the ps on two cores, every copy an exchange makes is taken from the
  workers' compute, so the direct call gains little over `RemoteCall` here (compare
  `easgd-10` with `easgd-10-remotecall`): an exchange still reads and writes each
  variable several times on both sides (snapshot, difference, updates, the local centre),
  besides the kernel's loopback copies, where a step of `async` only reads the variables
  and sends a gradient (compare `easgd-1` with `async`: the same bytes per step). That is
  what keeps `easgd-10` near, not at, 0.9 x the local-only ceiling on the 2.9 M model.
- Those passes are not the main cost, though: `copy-easgd-10`, which makes the same calls
  and moves the same bytes with no arithmetic at all, stays below 0.9 x too (section 1).
  Moving 2 x 11.6 MB per exchange through TensorFlow's RecvTensor path on loopback takes
  some 13 ms of CPU out of two cores that the workers' compute already fills; fusing the
  arithmetic into fewer kernels could at best close the gap between `easgd-10` and
  `copy-easgd-10`.
- On steps that do not exchange, the fixed cost (local step counter, comparison, Switch
  and Merge, and the skipped call ops, which the executor still visits) weighs on the tiny
  model only, and is close to what an empty `tf.compat.v1.cond` on a step counter costs
  (section 4): a graph with a Switch runs every op of the step under the executor's
  dead-tensor tracking. A functional `If` kept from lowering, tried instead, cost as much
  or more (its branch is a function call on every step). Before each task's exchange became
  one function call, the skipped branch held some ten ops per variable; side by side in one
  process that change saved 5 to 12 us a step.
- Once, in the run at d7ba208 (`easgd-64`, mlp-2.9M, round 0), both workers made almost no
  step for the whole window: the round took 17 s longer than the others and nothing was
  logged. It did not recur in that run's other rounds, nor in 8 clusters started afterwards
  to look for it (22 first exchanges).
- Calls to several ps tasks are made one after the other. (What looked like a hang of two
  calls in flight at once was the in-process deadlock of docs/API.md's "A whole cluster in one
  process": a worker's first call waits on a thread of the process's inter-op pool until
  the ps registered the function. Separate ps processes would allow parallel calls.)
- With `RemoteCall`, one RPC carries all of a task's centres; gRPC's limit of 2 GB per
  message therefore bounds the centres a single ps task may hold (use more ps tasks beyond
  that)."""


def main(argv):
    """Re-renders a report: `python -m benchmarks.report RESULTS_JSON REPORT_MD`."""
    if len(argv) != 3:
        raise SystemExit("usage: python -m benchmarks.report RESULTS_JSON REPORT_MD")
    results_path = pathlib.Path(argv[1])
    write(json.loads(results_path.read_text()), results_path.parent, argv[2])


if __name__ == "__main__":
    main(sys.argv)
