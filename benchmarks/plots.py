"""The PNG plots of the benchmark report: section 1's throughput, section 3's learning curves.

matplotlib is imported only when a plot is drawn; `tuning_plot.py` uses `PLOT_DPI` too.
"""

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
