"""The plot of the tuning grid (`tuning.py`): test accuracy against local steps, per tau.

`tuning_report.write` draws it into OUT/tuning.png for docs/TUNING.md's block.
"""

from benchmarks.plots import PLOT_DPI


def plot(results, path):
    """Test accuracy of the shared model against worker 0's local steps, a panel per tau."""
    import matplotlib  # noqa: PLC0415 - only the report needs matplotlib.

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    periods = sorted({c["period"] for c in results["configs"] if c["kind"] == "easgd"})
    styles = {
        ("contrib", "0"): ("#17becf", "-"),
        ("both", "0"): ("#1f77b4", "-"),
        ("paper", "0"): ("#1f77b4", "-"),
        ("contrib", "default"): ("#ff7f0e", "-"),
        ("both", "default"): ("#d62728", "-"),
        ("paper", "default"): ("#d62728", "-"),
        ("async", None): ("#444444", ":"),
        ("local", None): ("#999999", "--"),
    }
    columns = 2 if len(periods) > 1 else 1
    rows = -(-len(periods) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(5.5 * columns, 3.6 * rows), sharex=True, sharey=True, squeeze=False
    )
    axes = axes.ravel()
    most = max(
        entry["workers"][0]["log"][-1][1]
        for config in results["configs"]
        if config["kind"] == "easgd"
        for entry in results["runs"][config["name"]]
    )
    for index, (axis, period) in enumerate(zip(axes, periods, strict=False)):
        for config in results["configs"]:
            if config.get("period", period) != period:
                continue
            key = (config.get("alpha_rule", config["kind"]), config.get("rho_rule"))
            color, style = styles[key]
            label = config["name"]
            if config["kind"] == "easgd":
                label = f"alpha {key[0].replace('both', 'contrib = paper')}, rho {key[1]}"
            for repeat, entry in enumerate(results["runs"][config["name"]]):
                points = entry["workers"][0]["log"]
                axis.plot(
                    [p[1] for p in points],
                    [p[2] for p in points],
                    color=color,
                    linestyle=style,
                    alpha=0.7,
                    linewidth=1,
                    label=label if repeat == 0 else None,
                )
        axis.axhline(results["target"], color="#2ca02c", linestyle="--", linewidth=0.8)
        axis.set_ylim(0.5, 1.0)
        axis.set_title(f"tau = {period}")
        if index >= len(periods) - columns:
            axis.set_xlabel("local steps of worker 0")
        axis.legend(loc="lower right", fontsize=7)
    for axis in axes[len(periods) :]:
        axis.set_visible(False)
    axes[0].set_xlim(0, most)
    for axis in axes[::columns]:
        axis.set_ylabel("test accuracy of the shared model")
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    plt.close(figure)
