"""BENCHMARKS.md's sections (benchmarks/run.py): each heading names its module and make target,
and a section measured alone (`make bench-<section>`) is merged beside the stored others.

Renders the stored results (benchmarks/results/results.json) without plots; no TensorFlow,
no process.
"""

import json
import pathlib
import re

from benchmarks import run
from benchmarks.common import report

ROOT = pathlib.Path(__file__).resolve().parents[2]
MADE_BY = re.compile(r"^Made by `(benchmarks/\w+\.py)`")
MAKE = re.compile(r"`make ([\w-]+)`")


def _make_targets():
    """The Makefile's targets: its `name:` rules and the `bench-<section>` of BENCH_SECTIONS."""
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", text, flags=re.M))
    (sections,) = re.findall(r"^BENCH_SECTIONS := (.+)$", text, flags=re.M)
    return targets | {f"bench-{section}" for section in sections.split()}


def _headings(text):
    """{heading: the first non-empty line under it} of a Markdown report."""
    lines = [line for line in text.splitlines() if line.strip()]
    return {line: lines[i + 1] for i, line in enumerate(lines) if line.startswith(("## ", "### "))}


def test_every_heading_of_the_stored_report_names_its_module_and_make_target():
    results = json.loads((ROOT / "benchmarks" / "results" / "results.json").read_text())
    headings = _headings(run.render(results, plots={}))
    targets, modules = _make_targets(), set()
    for heading, under in headings.items():
        made = MADE_BY.match(under)
        assert made, f"{heading!r}: the line under it names no module: {under!r}"
        assert (ROOT / made.group(1)).is_file(), f"{heading!r}: {made.group(1)} is missing"
        named = MAKE.findall(under)
        assert named and set(named) <= targets, f"{heading!r}: {named} not all in the Makefile"
        modules.add(made.group(1).removeprefix("benchmarks/"))
    # The stored results hold every section: the Targets (1), sections 1 to 6 (6), the Keras
    # and exchange sections (2), contrib's side by side in 1 and the pinned run in 5 (2): 11.
    assert len(headings) == 11
    assert modules == {"run.py", "throughput.py", "contrib.py", "wire_bytes.py", "accuracy.py",
                       "overhead.py", "keras_fit.py", "exchange.py", "shaped.py", "pinned.py",
                       "larger_clusters.py"}  # fmt: skip


def test_every_section_run_measures_has_a_make_target_that_measures_it_alone():
    targets = _make_targets()
    assert {f"bench-{section}" for section in run.SECTIONS} <= targets
    assert {"bench", "bench-quick", "bench-strategies", "bench-tuning", "bench-scale"} <= targets


def test_a_section_of_the_main_run_says_only_where_it_is_made():
    results = {"command": "python -m benchmarks.run", "date": "2026-12-05 06:25 UTC"}
    line = report.made_by(results, "bytes", "wire_bytes")
    assert line == "Made by `benchmarks/wire_bytes.py`; measured alone by `make bench-bytes`."


def test_a_merged_section_replaces_its_keys_and_remembers_its_own_run():
    saved = {
        "command": "python -m benchmarks.run", "date": "2026-12-05 06:25 UTC",
        "throughput": {"mlp-2.9M": "old"}, "throughput_tf2": {"mlp-2.9M": "old tf2"},
        "bytes": {"local": 0.0}, "bytes_window": {"warm_steps": 64, "steps": 128},
        "contrib": {"run": "contrib's own"},
        "section_runs": {"accuracy": {"command": "an earlier merge"}},
    }  # fmt: skip
    command = "python -m benchmarks.run --sections=throughput,contrib --merge"
    # A run without a TF2 cluster (as a smoke run has): section 1's TF2 figures go too.
    new = {"command": command, "revision": {"commit": "abc1234", "changed": []},
           "quick": False, "date": "2026-12-07 07:00 UTC",
           "throughput": {"mlp-2.9M": "new"}, "contrib": {"run": "the new one"}}  # fmt: skip
    merged = run.merge(saved, new, ["throughput", "contrib"])
    assert merged["throughput"] == {"mlp-2.9M": "new"}
    assert "throughput_tf2" not in merged
    assert merged["contrib"] == {"run": "the new one"}
    # The others and the main run's provenance are kept.
    assert merged["bytes"] == saved["bytes"] and merged["bytes_window"] == saved["bytes_window"]
    assert (merged["command"], merged["date"]) == (saved["command"], saved["date"])
    # Section 1 remembers this run; contrib keeps its run in its own results (its text says
    # where it was measured); accuracy's earlier run is kept.
    assert sorted(merged["section_runs"]) == ["accuracy", "throughput"]
    run_of_throughput = merged["section_runs"]["throughput"]
    assert run_of_throughput["command"] == command
    line = report.made_by(merged, "throughput", "throughput")
    assert line == (
        "Made by `benchmarks/throughput.py`; measured alone by `make bench-throughput`. Measured "
        f"in a run of its own (`{command}`, {run_of_throughput['date']}, commit abc1234)."
    )


def test_a_section_merged_again_names_the_newer_run():
    saved = {"command": "c", "date": "d", "accuracy": {"a": []},
             "section_runs": {"accuracy": {"command": "a merge"}}}  # fmt: skip
    new = {"command": "c2", "revision": {"commit": "x"}, "quick": False, "date": "d2",
           "accuracy": {"b": []}}  # fmt: skip
    merged = run.merge(saved, new, ["accuracy"])
    assert merged["accuracy"] == {"b": []}
    assert merged["section_runs"]["accuracy"]["command"] == "c2"
    # Contrib alone over results without merged sections adds no section_runs.
    assert "section_runs" not in run.merge({"command": "c"}, {"contrib": {}}, ["contrib"])
