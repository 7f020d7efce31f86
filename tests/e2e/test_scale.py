"""The scale harness (benchmarks/scale.py, `make bench-scale`) in its smoke run.

`--quick` starts two ps tasks and a host of two workers as OS processes, measures the
exchange's costs, its calls to both ps tasks in three forms (before issue 38, one after
the other, at once), a window per link, the memory, the end-of-job pieces, and writes its
results, the report's generated block and the plot by itself, as the full run does (~2 min
here, quiet).
"""

import importlib.util
import json
import pathlib
import subprocess
import sys

from processes import child_env

from benchmarks import scale_report

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_quick_run_measures_and_writes_its_report(tmp_path):
    report = tmp_path / "SCALING.md"
    report.write_text(
        f"# Scaling\n\nHand-written.\n\n{scale_report.BEGIN}\nold\n{scale_report.END}\n"
    )
    finished = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--quick", f"--out={tmp_path}",
         f"--report={report}"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    results = json.loads((tmp_path / "scale.json").read_text())
    # The exchange's costs, measured: CPU on both sides, the model's bytes each way.
    (constants,) = results["constants"]
    assert constants["exchanges"] > 0 and sum(constants["ps_cpu"]) > 0
    assert constants["hosts_cpu"] > 0
    # One exchange alone on 2 ps tasks in each form: before issue 38, its calls one after
    # the other, and the library's; in a cluster of its own, no idle worker beside it.
    assert results["calls_cluster"] == {"workers": 1, "hosts": 1}
    assert sorted((m["ps"], m["form"]) for m in results["calls"]) == [
        (2, "at_once"),
        (2, "before_38"),
        (2, "one_by_one"),
    ]
    assert all(m["exchanges"] > 0 and m["latency"]["median"] > 0 for m in results["calls"])
    (measured,) = results["ps_counts"]
    windows = measured["windows"]
    assert {w["rate"] for w in windows} <= {None, "1gbit"}
    for window in windows:
        assert window["exchanges"] > 0 and window["steps"] > 0
        assert window["latency"]["median"] > 0
        if window["ps_link"] is not None:
            # About 2 x 2,913,290 x 4 bytes, and the frames (an exchange that straddles
            # an edge of the window counts in part).
            per_exchange = sum(window["ps_link"]) / window["exchanges"]
            assert 0.7 * 2 * 4 * 2_913_290 < per_exchange < 1.5 * 2 * 4 * 2_913_290
    memory = measured["memory"]
    assert set(memory) == {"0", "2"}
    assert memory["2"][0]["rss"] > 0 and memory["2"][0]["rss_used"] > 0
    pieces = results["pieces"]
    assert pieces["checkpoint"][0]["save"]["median"] > 0
    # The ledger written back to back, read whole every 0.2 s, polled for the end.
    assert [ledger["poll"] for ledger in pieces["ledger"]] == [None, "read", "end"]
    assert all(ledger["calls_per_sec"] > 0 for ledger in pieces["ledger"])
    (job,) = pieces["job"]
    assert job["workers"] == 2 and job["end_of_job"] > 0
    # The generated block replaced the old one; the hand-written text stays.
    text = report.read_text()
    assert text.startswith("# Scaling\n\nHand-written.\n")
    assert "\nold\n" not in text and text.count(scale_report.BEGIN) == 1
    assert "### Measured against the model" in text
    assert "### One exchange's calls: before issue 38, one after the other, and all at once" in (
        text
    )
    assert "in a cluster of one worker (nothing else on its core)" in text
    # Every window beside its prediction goes to a CSV the block links to, not into it.
    windows = (tmp_path / "scale_windows.csv").read_text().splitlines()
    assert len(windows) == 1 + len(windows_kept(results))
    assert "(scale_windows.csv)" in text
    assert results["revision"]["commit"] in text
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "scale.png").stat().st_size > 0


def windows_kept(results):
    """The windows in which every worker exchanged once at least (the report keeps those)."""
    return [
        w for pc in results["ps_counts"] for w in pc["windows"] if w["exchanges"] >= w["workers"]
    ]


def test_help_answers_at_once_without_tensorflow():
    finished = subprocess.run(
        [sys.executable, "-c", "import sys, benchmarks.scale; "
         "print('tensorflow' in sys.modules)"],
        cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert finished.stdout.strip() == "False"
