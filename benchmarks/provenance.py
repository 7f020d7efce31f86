"""Where the benchmarks' numbers come from: the checkout's revision and the machine.

`run.py`, `tuning.py` and `scale.py` record both in their results (`run_record`); the
reports (`report.py`, `tuning_report.py`, `scale_report.py`) print the revision with
`revision_text`. `RunLog` is a driver's progress log.
"""

import importlib.metadata
import os
import pathlib
import platform
import shlex
import subprocess
import time

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
    cpu = "unknown"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        kb = int(pathlib.Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        tensorflow = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tensorflow = "unknown"
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


def run_record(module, argv, quick):
    """The provenance a results file starts with: the command, revision, date, machine
    and load average before the run."""
    return {
        "command": " ".join(shlex.quote(a) for a in ["python", "-m", module, *argv[1:]]),
        "revision": source_revision(),
        "quick": quick,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_before": os.getloadavg(),
    }


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
    keeping its text around them; a new report starts from `template` (the checkout's
    report) if that exists, else holds the block alone."""
    report_path, template = pathlib.Path(report_path), pathlib.Path(template)
    if report_path.is_file():
        text = report_path.read_text()
    elif template.is_file():
        text = template.read_text()
    else:
        text = f"{begin}\n{end}\n"
    head, found_begin, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        head, tail = text.rstrip() + "\n\n", "\n"
    report_path.write_text(head + block + tail)
