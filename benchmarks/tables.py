"""Summaries of measured rounds and runs, the one Markdown table renderer, and plot helpers."""

import statistics

PLOT_DPI = 110


def table(header, rows):
    """A Markdown table. `header`: its names, "a | b | c" (a name starting with "-" is
    left-aligned, the others right); each row a sequence of cells or an "x | y | z" line."""
    names = [name.strip() for name in header.split("|")]
    align = ["---" if name.startswith("-") else "---:" for name in names]
    lines = ["| " + " | ".join(name.removeprefix("-") for name in names) + " |"]
    lines.append("|" + "|".join(align) + "|")
    for row in rows:
        lines.append(f"| {row if isinstance(row, str) else ' | '.join(map(str, row))} |")
    return "\n".join(lines)


def num(value, digits=1, suffix=""):
    """`value` to `digits` decimals, or "-" for None."""
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def seconds(value):
    return "not reached" if value is None else f"{value:.1f} s"


def status(flag):
    return "skipped" if flag is None else "**met**" if flag else "**not met**"


def first_time_at(curve, target):
    """Seconds until the curve ((secs, accuracy, steps), ...) first reaches `target`."""
    return next((point[0] for point in curve if point[1] >= target), None)


def per_round(runs):
    """Steps/s per worker of each round: the mean over the workers."""
    return [statistics.fmean(run["per_worker"]) for run in runs]


def summarize_throughput(by_config):
    """{config: (median, min, max)} of the per-round steps/s per worker."""
    return {
        c: (statistics.median(v), min(v), max(v))
        for c, v in ((c, per_round(runs)) for c, runs in by_config.items())
    }


def median_of(by_config, config):
    """The median per-round steps/s of `config`, or None if not measured."""
    return statistics.median(per_round(by_config[config])) if config in by_config else None


def per_round_ratio(by_config, config, reference):
    """Median over rounds of config / reference within the same round (drift cancels)."""
    if config not in by_config or reference not in by_config:
        return None
    pairs = zip(per_round(by_config[config]), per_round(by_config[reference]), strict=True)
    return statistics.median(value / base for value, base in pairs)


def theory_bytes(config, params, window=None):
    """Bytes per local step the algorithm must move (payload), or None if unknown; with a
    `window` (warm-up steps, counted steps), EASGD counts the exchanges that fall in it."""
    payload = 2 * params * 4
    if config == "local":
        return 0.0
    if config in ("async", "sync"):
        return float(payload)  # Read every variable, send every gradient.
    if "easgd-" not in config:
        return None
    period = int(config.split("easgd-", 1)[1].split("-", 1)[0])
    if config.endswith(("-bf16", "-fp16")):
        payload //= 2
    if window is None:
        return payload / period
    warm, counted = window
    return payload * ((warm + counted) // period - warm // period) / counted


def link_bytes_per_step(measured):
    """Bytes on the ps's link per local step of a shaped window: over the steps the rates
    give for the whole window (whole steps would miss those in flight at its end)."""
    steps = sum(measured["per_worker"]) * measured["seconds"]
    return measured["ps_bytes"] / steps if steps > 0 else 0.0


def median_time(times):
    """Median time to target, a run that never reached it counting as infinitely slow."""
    ordered = sorted(times, key=lambda t: float("inf") if t is None else t)
    if len(ordered) % 2:
        return ordered[len(ordered) // 2]
    low, high = ordered[len(ordered) // 2 - 1], ordered[len(ordered) // 2]
    return None if low is None or high is None else (low + high) / 2


def accuracy_summary(by_config, target):
    """{config: (times to target per run, final accuracies, mean steps per worker, workers)}."""
    return {
        config: (
            [first_time_at(run["curve"], target) for run in runs],
            [run["curve"][-1][1] for run in runs],
            [statistics.fmean(run["steps"]) for run in runs],
            len(runs[0]["steps"]),
        )
        for config, runs in by_config.items()
    }


def accuracy_rows(by_config, target, prefix=""):
    """Rows of `ACCURACY_HEADER`, each started with the cells of `prefix` ("a | b | ")."""
    rows = []
    for config, (times, finals, _, workers) in accuracy_summary(by_config, target).items():
        each = ", ".join("-" if t is None else f"{t:.1f}" for t in times)
        median = num(median_time(times))
        rows.append(
            f"{prefix}{config} | {workers} | {each} | {median} | {statistics.median(finals):.3f}"
        )
    return rows


ACCURACY_HEADER = "-configuration | workers | -s to 97% (each run) | median s | final accuracy"


def pyplot():
    """matplotlib's pyplot on the Agg backend (only the reports import matplotlib)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def save(figure, path):
    """Writes `figure` to `path` and closes it; returns `path`."""
    figure.tight_layout()
    figure.savefig(path, dpi=PLOT_DPI)
    pyplot().close(figure)
    return path
