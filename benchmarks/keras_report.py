"""The Keras section of the benchmark report: throughput ratio and time to accuracy.

Renders what `keras_section.py` measured, with `tables.py`'s tables; `report.py` puts it
after section 3 and adds its target to the targets table.
"""

from benchmarks.tables import (
    accuracy_summary,
    accuracy_table,
    median_time,
    per_round_ratio,
    summarize_throughput,
    throughput_table,
)

#: The issue's target: EASGD's `model.fit` at tau 10 keeps this share of plain `model.fit`.
THROUGHPUT_TARGET = 0.85

_STATIC = (
    "Each worker process runs its own eager `model.fit` (Keras 3); `keras-fit` is plain "
    "`model.fit` on each worker alone, `keras-easgd-10` the same with `ElasticAverageCallback` "
    "(tau 10): every 10 batches the worker's weights go to the ps, which adds d = alpha "
    "(x - c) to the centre and returns d; `keras-easgd-10-overlap` lets the exchange travel "
    "while the worker trains on (`overlap=True`, the move lands one period later). Same "
    "model, batch and learning rate in all; the "
    "throughput windows are interleaved in rounds as in section 1. Time to accuracy as in "
    "section 3: the shared model is the centre with EASGD (2 workers) and the worker's own "
    "weights for `keras-fit` (1 worker); worker 0 evaluates it every 0.5 s."
)


def render(results):
    """The section's Markdown lines, or none when it was not run."""
    if "keras" not in results:
        return []
    section = results["keras"]
    info = results["models"].get(section["model"], {})
    rounds = len(next(iter(section["throughput"].values())))
    target = results["accuracy_target"]
    return [
        "## Keras model.fit",
        "",
        _STATIC,
        "",
        f"**{section['model']}** ({info.get('params', 0):,} parameters, batch "
        f"{info.get('batch', '?')}), {rounds} interleaved rounds:",
        "",
        throughput_table(section["throughput"], (("keras-fit", "plain model.fit"),)),
        "",
        accuracy_table(accuracy_summary(section["accuracy"], target), target),
        "",
    ]


def targets(results):
    """The section's target row: (target, measured, met?)."""
    if "keras" not in results:
        return []
    by_config = results["keras"]["throughput"]
    summary = summarize_throughput(by_config)
    ratio = summary["keras-easgd-10"][0] / summary["keras-fit"][0]
    in_round = per_round_ratio(by_config, "keras-easgd-10", "keras-fit")
    times = accuracy_summary(results["keras"]["accuracy"], results["accuracy_target"])
    easgd_time = median_time(times["keras-easgd-10"][0])
    measured = (
        f"{ratio:.2f} x (ratio of medians); {in_round:.2f} x (median of per-round ratios); "
        f"to {results['accuracy_target']:.0%}: "
        + ("not reached" if easgd_time is None else f"{easgd_time:.1f} s")
    )
    overlap = per_round_ratio(by_config, "keras-easgd-10-overlap", "keras-fit")
    if overlap is not None:
        measured += f"; with overlap=True {overlap:.2f} x (per round)"
    return [
        (
            f"Keras model.fit + EASGD tau=10 >= {THROUGHPUT_TARGET} x plain model.fit",
            measured,
            ratio >= THROUGHPUT_TARGET,
        )
    ]
