"""tools/test_matrix.py: the pairs it runs, how it reads pytest, the table it writes."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))

import test_matrix  # noqa: E402


def test_every_pair_has_a_wheel_and_no_pair_is_run_twice():
    pairs = test_matrix.all_pairs()
    # 7 minor releases for 3.10 and 3.11, 6 for 3.12 (from 2.16), 2 for 3.13 (from 2.20).
    assert len(pairs) == len(set(pairs)) == 7 + 7 + 6 + 2
    assert ("3.13", "2.19") not in pairs and ("3.12", "2.15") not in pairs
    # The first seven pairs are Python 3.11 on 2.15 ... 2.21: each release early in a run.
    assert [minor for _, minor in pairs[:7]] == list(test_matrix.TENSORFLOW)


@pytest.mark.parametrize(
    ("line", "counts"),
    [
        ("480 passed, 2 skipped in 73.21s (0:01:13)", (480, 0, 2, 0)),
        ("3 failed, 477 passed, 2 skipped, 1 error in 80.00s", (477, 3, 2, 1)),
        ("12 passed in 1.0s", (12, 0, 0, 0)),
    ],
)
def test_pytests_summary_line_is_read(line, counts):
    outcome = test_matrix.Outcome("3.11", "2.21.0")
    test_matrix._count(outcome, f"....\n{line}\n")
    assert (outcome.passed, outcome.failed, outcome.skipped, outcome.errors) == counts


def test_the_table_has_a_cell_per_pair():
    outcomes = [
        test_matrix.Outcome("3.10", "2.15.1", passed=470, skipped=4),
        test_matrix.Outcome("3.13", "2.21.0", passed=478, failed=2),
        test_matrix.Outcome("3.12", "2.18.1", problem="install failed: no matching wheel"),
    ]
    rows = test_matrix.table(outcomes).splitlines()
    assert rows[0] == (
        "| Python | TF 2.15 | TF 2.16 | TF 2.17 | TF 2.18 | TF 2.19 | TF 2.20 | TF 2.21 |"
    )
    assert rows[2].startswith("| 3.10 | 470 passed, 4 skipped | not run |")
    assert "**install failed: no matching wheel**" in rows[4]
    assert rows[5] == (
        "| 3.13 | no wheel | no wheel | no wheel | no wheel | no wheel | not run | **2 failed** |"
    )


def test_failing_tests_are_named_under_the_table():
    output = (
        "..F.\n=== short test summary info ===\n"
        "FAILED tests/cluster/test_wire.py::test_moves[ref] - AssertionError: 0.5 != 0.25\n"
        "ERROR tests/unit/test_keras_callback.py::test_restart - OSError\n"
        "1 failed, 3 passed, 1 error in 2.00s\n"
    )
    outcome = test_matrix.Outcome("3.11", "2.17.1")
    test_matrix._count(outcome, output)
    assert outcome.failures == [
        "tests/cluster/test_wire.py::test_moves[ref]",
        "tests/unit/test_keras_callback.py::test_restart",
    ]
    rows = test_matrix.table([outcome]).splitlines()
    assert "**1 failed**" in rows[3]
    assert rows[-1] == (
        "- Python 3.11, TensorFlow 2.17.1: `tests/unit/test_keras_callback.py::test_restart`"
    )


def test_the_report_names_the_commit_of_each_pair(tmp_path):
    report = tmp_path / "VERSIONS.md"
    report.write_text(f"# Versions\n\n{test_matrix.BEGIN}\nold\n{test_matrix.END}\nkept\n")
    outcomes = [
        test_matrix.Outcome("3.11", "2.15.1", passed=5, commit="commit aaa"),
        test_matrix.Outcome("3.11", "2.16.2", passed=5, commit="commit aaa"),
        test_matrix.Outcome("3.12", "2.20.0", passed=5, commit="commit bbb"),
    ]
    test_matrix.write_report(report, outcomes)
    text = report.read_text()
    assert "at commit aaa (3.11/2.15.1, 3.11/2.16.2); commit bbb (3.12/2.20.0);" in text
    assert "old" not in text and text.endswith(f"{test_matrix.END}\nkept\n")
    test_matrix.write_report(report, outcomes[:1])
    assert "at commit aaa; `pytest" in report.read_text()
