"""The PNG plots of the benchmark report: section 1's throughput, section 3's learning curves;
and docs/SCALING.md's (`plot_scale`).

matplotlib is imported only when a plot is drawn; `tuning_plot.py` uses `PLOT_DPI` too.
"""

import numpy as np

from benchmarks import cost_model, scale_costs, specs
from benchmarks.tables import summarize_throughput

PLOT_DPI = 110


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


def plot_scale(results, rows, by_wire, compute, path):
    """Exchanges/s served against workers, a panel per ps count and tau: dots measured,
    lines the model, a colour per wire and link."""
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    plan, params = results["plan"], specs.MODELS[results["model"]].num_params
    periods, ps_counts = plan["periods"], plan["ps"]
    figure, axes = plt.subplots(
        len(periods), len(ps_counts), figsize=(4.2 * len(ps_counts), 3.6 * len(periods)),
        squeeze=False, sharey=True,
    )  # fmt: skip
    grid = np.unique(np.geomspace(1, max(plan["workers"]), 40).astype(int))
    series = sorted({(r["wire"] or "", r["rate"] or "") for r in rows})
    for (row_index, period), (col, ps_tasks) in (
        (a, b) for a in enumerate(periods) for b in enumerate(ps_counts)
    ):
        axis = axes[row_index][col]
        for index, (wire, rate) in enumerate(series):
            color, label = (
                plt.cm.tab10(index % 10),
                f"{wire or 'float32'}, {scale_costs.rate_name(rate)}",
            )
            points = [
                (r["workers"], r["measured"])
                for r in rows
                if (r["wire"] or "", r["rate"] or "") == (wire, rate)
                and r["ps"] == ps_tasks and r["period"] == period
            ]  # fmt: skip
            if not points:
                continue
            axis.plot(*zip(*sorted(points), strict=True), "o", color=color, label=label, ms=4)
            model = [
                cost_model.predict(
                    scale_costs.harness_cluster(int(w), ps_tasks, rate or None),
                    by_wire[wire or None], scale_costs.wire_bytes(params, wire), period, compute,
                ).exchanges_per_sec
                for w in grid
            ]  # fmt: skip
            axis.plot(grid, model, "-", color=color, alpha=0.6, linewidth=1)
        axis.set_xscale("log", base=2)
        axis.set_title(f"{ps_tasks} ps, tau {period}", fontsize=9)
        axis.set_xlabel("workers")
        if col == 0:
            axis.set_ylabel("exchanges/s the ps tasks serve")
    axes[0][0].legend(fontsize=7, loc="upper left")
    figure.suptitle(
        f"Measured (dots) and cost model (lines), {results['model']}, at commit "
        f"{results['revision']['commit']}",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)
