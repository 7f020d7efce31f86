"""Where the benchmarks' numbers come from: the checkout's revision and the machine.

`run.py` and `tuning.py` record both in their results; the reports (`report.py`,
`tuning_report.py`) print the revision with `revision_text`.
"""

import importlib.metadata
import os
import pathlib
import platform
import subprocess

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
