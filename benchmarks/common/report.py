"""What the drivers (run.py, tuning.py, scale.py) share: their flags and main (`drive`),
the provenance of their numbers (commit, machine, command, load), and the reports'
summaries, Markdown tables and plots.
"""

import importlib.metadata
import json
import math
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
ACCURACY_HEADER = "-configuration | workers | -s to 97% (each run) | median s | final accuracy"


def source_revision():
    """The checkout's commit, and the files of the benchmarked code that differ from it."""

    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=30).stdout  # fmt: skip

    paths = ("benchmarks", ":!benchmarks/results", "tf_contrib_easgd", "setup.py")
    try:
        head = git("rev-parse", "--short", "HEAD")
        status = git("status", "--porcelain", "--", *paths)
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "changed": []}
    return {"commit": head.strip(), "changed": sorted(line[3:] for line in status.splitlines())}


def machine():
    """What the numbers were measured on."""
    cpu, memory, tensorflow = "unknown", "unknown", "unknown"
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        memory = f"{int(pathlib.Path('/proc/meminfo').read_text().split()[1]) / 2**20:.0f} GiB"
        tensorflow = importlib.metadata.version("tensorflow")
    except (OSError, ValueError, StopIteration, importlib.metadata.PackageNotFoundError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": memory, "os": platform.platform(),
            "python": platform.python_version(), "tensorflow": tensorflow}  # fmt: skip


def revision_text(revision, limit=6):
    """ "commit X", and the files of the benchmarked code that differed from it, if any."""
    text, changed = f"commit {revision['commit']}", revision.get("changed") or []
    if changed:
        shown = ", ".join(f"`{name}`" for name in changed[:limit])
        more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
        text += f" with uncommitted changes to {shown}{more}"
    return text


def command_text(command):
    """A recorded command without an option whose value is an absolute path."""
    return shlex.join(w for w in shlex.split(command) if not w.partition("=")[2].startswith("/"))


def own_run(results):
    """The provenance a section keeps of the run that measured it: command, revision, date,
    load (`--merge` may later put it beside others' results)."""
    run = {key: results[key] for key in ("command", "revision", "quick")}
    run.update(date=time.strftime("%Y-%m-%d %H:%M %Z"), load_before=os.getloadavg())
    return run


def where_measured(run, results):
    """ "in this run", or the run of its own (`own_run`) that measured a merged section."""
    if (run["command"], run["date"]) == (results["command"], results["date"]):
        return "in this run"
    revision = revision_text(run["revision"])
    return f"in a run of its own (`{command_text(run['command'])}`, {run['date']}, {revision})"


def made_by(results, section, module):
    """The line under a section's heading: the module that makes it and the make target that
    measures it alone, `make bench-<section>`; if that target measured it after the rest
    (`results["section_runs"]`, their `own_run`s), which run."""
    line = f"Made by `benchmarks/{module}.py`; measured alone by `make bench-{section}`."
    run = results.get("section_runs", {}).get(section)
    return line + (f" Measured {where_measured(run, results)}." if run else "")


def header(results, make_target):
    """The Markdown line naming the commit measured, the command, date, machine and load."""
    machine, load = results["machine"], results.get("load_after")
    loads = ", ".join(f"{x:.2f}" for x in results["load_before"])
    if load:
        loads += " before, " + ", ".join(f"{x:.2f}" for x in load) + " after"
    made = " (a smoke run)" if results["quick"] else f" (`{make_target}`)"
    return [
        f"Measured at {revision_text(results['revision'])}{made}: "
        f"`{command_text(results['command'])}`; {results['date']}, "
        f"{results.get('duration_secs', 0) / 60:.0f} min. {machine['cpu']}, {machine['cores']} "
        f"cores, {machine['memory']}; Python {machine['python']}, TensorFlow "
        f"{machine['tensorflow']}; load average {loads}.",
    ]


def define_flags(name, report):
    """--quick, --out, --report and --rerender of a driver of OUT/`name`.json and `report`."""
    flags.DEFINE_bool("quick", False, "Smoke run: fewer configurations, rounds and seconds.")
    flags.DEFINE_string("out", None, f"Folder of {name}.json, its log and plots (default: "
                        "benchmarks/results; with --quick a temporary folder).")  # fmt: skip
    flags.DEFINE_string("report", None, f"Markdown to write (default: {report}; with --quick "
                        f"OUT/{pathlib.Path(report).name}).")  # fmt: skip
    flags.DEFINE_bool("rerender", False, f"Only re-render the report from OUT/{name}.json.")


def drive(module, name, report, measure, write, log_name=None, update=None):
    """A driver's main: re-renders `report` from OUT/`name`.json (--rerender), or runs
    `measure(results, log)`, saves the results (with `update`, what `update(saved, results)`
    makes of the saved ones and these) and the log (OUT/`log_name`), and calls
    `write(results, out, path)`."""
    quick, report = flags.FLAGS.quick, pathlib.Path(report)
    temp = pathlib.Path(tempfile.gettempdir()) / f"easgd-bench-{report.stem.lower()}-quick"
    out = pathlib.Path(flags.FLAGS.out or (temp if quick else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    path = pathlib.Path(flags.FLAGS.report or (out / report.name if quick else ROOT / report))
    saved = out / f"{name}.json"
    if flags.FLAGS.rerender:
        return write(json.loads(saved.read_text()), out, path)
    started, lines = time.time(), []

    def log(message):  # Each line printed with the seconds since the start, and kept.
        lines.append(f"[{time.time() - started:6.0f} s] {message}")
        print(lines[-1], flush=True)

    results = {"command": shlex.join(["python", "-m", module, *sys.argv[1:]]),
               "revision": source_revision(), "quick": quick,
               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": machine(),
               "load_before": os.getloadavg()}  # fmt: skip
    log(f"load average {results['load_before']}")
    measure(results, log)
    results.update(load_after=os.getloadavg(), duration_secs=time.time() - started)
    if update:
        results = update(json.loads(saved.read_text()), results)
    saved.write_text(json.dumps(results, indent=1))
    (out / (log_name or f"{name}.log")).write_text("\n".join(lines) + "\n")
    write(results, out, path)
    log(f"done in {(time.time() - started) / 60:.1f} min: {path}, {saved}")


def write_generated_block(report_path, template, begin, end, block):
    """Writes `block` (from `begin` to `end`) into `report_path` between its markers,
    keeping the text around them; a new report starts from `template` if that exists."""
    if report_path.is_file():
        text = report_path.read_text()
    else:
        text = template.read_text() if template.is_file() else f"{begin}\n{end}\n"
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        head, tail = text.rstrip() + "\n\n", "\n"
    report_path.write_text(head + block + tail)


def relative(path, base):
    """`path` relative to folder `base` (for a report's image links)."""
    return os.path.relpath(pathlib.Path(path).resolve(), pathlib.Path(base).resolve())


def table(header, rows):
    """A Markdown table. `header`: its names, "a | b | c" (a name starting with "-" is
    left-aligned, the others right); each row a sequence of cells or an "x | y | z" line."""
    names = [name.strip() for name in header.split("|")]
    lines = ["| " + " | ".join(name.removeprefix("-") for name in names) + " |"]
    lines.append("|" + "|".join("---" if n.startswith("-") else "---:" for n in names) + "|")
    lines += [f"| {r if isinstance(r, str) else ' | '.join(map(str, r))} |" for r in rows]
    return "\n".join(lines)


def num(value, digits=1, suffix=""):
    """`value` to `digits` decimals, or "-" for None."""
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def seconds(value):
    return "not reached" if value is None else f"{value:.1f} s"


def ms(value):
    """Seconds `value` as whole milliseconds, or "-" for None."""
    return "-" if value is None else f"{value * 1e3:.0f}"


def per_round(runs):
    """Steps/s per worker of each round: the mean over the workers."""
    return [statistics.fmean(run["per_worker"]) for run in runs]


def median_of(by_config, config):
    """The median per-round steps/s of `config`, or None if not measured."""
    return statistics.median(per_round(by_config[config])) if config in by_config else None


def per_round_ratio(by_config, config, reference):
    """Median over rounds of config / reference within the same round (drift cancels)."""
    if config not in by_config or reference not in by_config:
        return None
    pairs = zip(per_round(by_config[config]), per_round(by_config[reference]), strict=True)
    return statistics.median(value / base for value, base in pairs)


def median_interval(values, confidence=0.95):
    """A distribution-free interval of the median of `values`: (x_(k), x_(n+1-k)) of the
    sorted values for the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2,
    which holds the median with at least `confidence`; (min, max) when n is too small for
    any k (n < 6 at 95 %)."""
    ordered, n = sorted(values), len(values)
    tail, k = (1.0 - confidence) / 2, 1
    while math.fsum(math.comb(n, i) for i in range(k + 1)) / 2**n <= tail:
        k += 1
    return ordered[k - 1], ordered[n - k]


def link_bytes_per_step(measured):
    """Bytes on the ps's link per local step of a shaped window: over the steps the rates
    give for the whole window (whole steps would miss those in flight at its end)."""
    steps = sum(measured["per_worker"]) * measured["seconds"]
    return measured["ps_bytes"] / steps if steps > 0 else 0.0


def link_megabytes(by_config, config):
    """Median MB on the ps's link per local step of `config`, or None."""
    if config not in by_config:
        return None
    return statistics.median(link_bytes_per_step(run) for run in by_config[config]) / 1e6


def median_time(times):
    """Median time to target, a run that never reached it counting as infinitely slow."""
    ordered = sorted(times, key=lambda t: float("inf") if t is None else t)
    if len(ordered) % 2:
        return ordered[len(ordered) // 2]
    low, high = ordered[len(ordered) // 2 - 1], ordered[len(ordered) // 2]
    return None if low is None or high is None else (low + high) / 2


def first_time_at(curve, target=0.97):
    """Seconds until the curve ((secs, accuracy, steps), ...) first reaches `target`."""
    return next((point[0] for point in curve if point[1] >= target), None)


def accuracy_summary(by_config):
    """{config: (seconds to 97 % of each run, final accuracies, workers)}."""
    return {config: ([first_time_at(run["curve"]) for run in runs],
                     [run["curve"][-1][1] for run in runs], len(runs[0]["steps"]))
            for config, runs in by_config.items()}  # fmt: skip


def accuracy_rows(by_config, prefix=""):
    """Rows of `ACCURACY_HEADER`, each started with the cells of `prefix` ("a | b | ")."""
    rows = []
    for config, (times, finals, workers) in accuracy_summary(by_config).items():
        each, median = ", ".join(num(t) for t in times), num(median_time(times))
        rows.append(
            f"{prefix}{config} | {workers} | {each} | {median} | {statistics.median(finals):.3f}"
        )
    return rows


def pyplot():
    """matplotlib's pyplot on the Agg backend (only the reports import matplotlib)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def save_figure(figure, path):
    """Writes `figure` to `path` and closes it; returns `path`."""
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot().close(figure)
    return path


def curves(by_config, path):
    """Test accuracy against wall time, a colour per configuration; returns `path`."""
    figure, axis = pyplot().subplots(figsize=(7, 4.2))
    for index, (config, runs) in enumerate(by_config.items()):
        for repeat, run in enumerate(runs):
            secs, accuracy, _ = zip(*run["curve"], strict=True)
            label = f"{config} x{len(run['steps'])}" if repeat == 0 else None
            axis.plot(secs, accuracy, color=f"C{index}", label=label)
    axis.axhline(0.97, color="#2ca02c", linestyle="--", linewidth=1)
    axis.set(ylim=(0.5, 1.0), xlabel="wall time (s)", ylabel="test accuracy of the shared model")
    axis.legend(loc="lower right", fontsize=8)
    return save_figure(figure, path)
