"""Where the benchmarks' numbers come from (commit, machine, command, load), and where they go.

Every driver (run.py, tuning.py, scale.py) has `define_flags`'s flags, records `run_record`
in its results and saves them with `save`; every report prints `header`.
"""

import importlib.metadata
import json
import os
import pathlib
import platform
import shlex
import subprocess
import tempfile
import time

from absl import flags

ROOT = pathlib.Path(__file__).resolve().parent.parent


def source_revision():
    """The checkout's commit, and the files of the benchmarked code that differ from it."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
        status = _git(
            "status",
            "--porcelain",
            "--",
            "benchmarks",
            ":!benchmarks/results",
            "tf_contrib_easgd",
            "setup.py",
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "changed": []}
    return {"commit": head, "changed": sorted(line[3:] for line in status.splitlines())}


def _git(*arguments):
    return subprocess.run(
        ["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def machine():
    """What the numbers were measured on."""
    cpu, memory, tensorflow = "unknown", "unknown", "unknown"
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
        kb = int(pathlib.Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 2**20:.0f} GiB"
        tensorflow = importlib.metadata.version("tensorflow")
    except (OSError, ValueError, StopIteration, importlib.metadata.PackageNotFoundError):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tensorflow,
    }


def revision_text(revision, limit=6):
    """ "commit X", and the files of the benchmarked code that differed from it, if any."""
    text = f"commit {revision['commit']}"
    changed = revision.get("changed") or []
    if changed:
        shown = ", ".join(f"`{name}`" for name in changed[:limit])
        more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
        text += f" with uncommitted changes to {shown}{more}"
    return text


def command_text(command):
    """A recorded command without machine paths: an option whose value is an absolute
    path is left out (its default names the checkout's)."""
    words = shlex.split(command)
    return shlex.join(w for w in words if not w.partition("=")[2].startswith("/"))


def run_record(module, argv, quick):
    """The provenance a results file starts with."""
    return {
        "command": shlex.join(["python", "-m", module, *argv[1:]]),
        "revision": source_revision(),
        "quick": quick,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_before": os.getloadavg(),
    }


def header(results, make_target):
    """The Markdown lines naming the commit measured, the command, date, machine and load."""
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


class RunLog:
    """A driver's progress log: each line printed with the seconds since the start, and kept."""

    def __init__(self):
        self.started = time.time()
        self.lines = []

    def __call__(self, message):
        line = f"[{time.time() - self.started:6.0f} s] {message}"
        print(line, flush=True)
        self.lines.append(line)


def write_generated_block(report_path, template, begin, end, block):
    """Writes `block` (from `begin` to `end`) into `report_path` between its markers,
    keeping the text around them; a new report starts from `template` if that exists."""
    report_path, template = pathlib.Path(report_path), pathlib.Path(template)
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


def define_flags(name, report):
    """--quick, --out, --report and --rerender of a driver that writes OUT/`name`.json and
    `report` (a path in the checkout)."""
    flags.DEFINE_bool("quick", False, "Smoke run: fewer configurations, rounds and seconds.")
    flags.DEFINE_string("out", None, f"Folder of {name}.json, its log and plots (default: "
                        "benchmarks/results; with --quick a temporary folder).")  # fmt: skip
    flags.DEFINE_string("report", None, f"Markdown to write (default: {report}; with --quick "
                        f"OUT/{pathlib.Path(report).name}).")  # fmt: skip
    flags.DEFINE_bool("rerender", False, f"Only re-render the report from OUT/{name}.json.")


def outputs(report):
    """(OUT, the report's path) as the flags of `define_flags` say; OUT made."""
    quick, report = flags.FLAGS.quick, pathlib.Path(report)
    temp = pathlib.Path(tempfile.gettempdir()) / f"easgd-bench-{report.stem.lower()}-quick"
    out = pathlib.Path(flags.FLAGS.out or (temp if quick else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    return out, pathlib.Path(flags.FLAGS.report or (out / report.name if quick else ROOT / report))


def save(results, log, path, log_path=None):
    """Writes `results` to `path` (.json) and the run's log to `log_path` (default: beside
    it, .log)."""
    path = pathlib.Path(path)
    path.write_text(json.dumps(results, indent=1))
    pathlib.Path(log_path or path.with_suffix(".log")).write_text("\n".join(log.lines) + "\n")
