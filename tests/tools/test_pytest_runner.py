"""The runner of every py_test (tests/support/pytest_runner.py): Bazel's protocol onto pytest.

Its filter and report flags, and its test sharding: a tier's shared py_test has
`shard_count` shards (tests/tiers.bzl), and Bazel runs the runner once per shard with
TEST_TOTAL_SHARDS and TEST_SHARD_INDEX, expecting TEST_SHARD_STATUS_FILE to be touched.
The functions are checked directly; the end-to-end cases run the runner as Bazel does, on a
small generated suite with no conftest (no TensorFlow), in ~1 s each.
"""

import os
import pathlib
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from pytest_runner import exit_status, pytest_args, shard_files, shard_of

RUNNER = pathlib.Path(__file__).resolve().parents[1] / "support" / "pytest_runner.py"
UNIT_FILES = sorted(path.name for path in (RUNNER.parents[1] / "unit").glob("test_*.py"))


def _sharded(index, total, **more):
    return {"TEST_TOTAL_SHARDS": str(total), "TEST_SHARD_INDEX": str(index), **more}


def test_runner_passes_bazel_filter_and_report_to_pytest():
    environ = {"TESTBRIDGE_TEST_ONLY": "placement", "XML_OUTPUT_FILE": "/out/test.xml"}
    assert pytest_args(["tests/test_hook.py"], environ) == [
        "-p",
        "no:cacheprovider",
        "tests/test_hook.py",
        "-k",
        "placement",
        "--junitxml=/out/test.xml",
    ]


def test_runner_needs_a_test_file():
    with pytest.raises(ValueError, match=r"Supplied arguments: \['-x'\]"):
        pytest_args(["-x"], {})


def test_shard_is_none_unless_bazel_shards_the_test():
    assert shard_of({}) is None
    assert shard_of(_sharded(0, 1)) is None  # shard_count = 1: one process, all files.
    assert shard_of(_sharded(2, 3)) == (2, 3)


@pytest.mark.parametrize(("index", "total"), [("2", "2"), ("-1", "2"), ("x", "2"), (None, "2")])
def test_a_bad_shard_is_named(index, total):
    environ = {"TEST_TOTAL_SHARDS": total}
    if index is not None:
        environ["TEST_SHARD_INDEX"] = index
    with pytest.raises(ValueError, match=rf"TEST_SHARD_INDEX={index!r}, TEST_TOTAL_SHARDS='2'"):
        shard_of(environ)


def test_the_sorted_files_are_dealt_round_robin():
    files = ["test_c.py", "test_a.py", "test_e.py", "test_b.py", "test_d.py"]
    # Sorted a b c d e; shard 0 of 2 takes the 1st, 3rd and 5th, shard 1 the 2nd and 4th.
    assert shard_files(files, (0, 2)) == ["test_a.py", "test_c.py", "test_e.py"]
    assert shard_files(files, (1, 2)) == ["test_b.py", "test_d.py"]
    # 3 shards: a d | b e | c.
    assert [shard_files(files, (i, 3)) for i in range(3)] == [
        ["test_a.py", "test_d.py"],
        ["test_b.py", "test_e.py"],
        ["test_c.py"],
    ]
    assert shard_files(files, (6, 7)) == []  # More shards than files: nothing for shard 6.
    assert shard_files(files, None) == sorted(files)


@pytest.mark.parametrize("total", [1, 2, 3, 5, len(UNIT_FILES) + 1])
def test_each_file_runs_in_exactly_one_shard(total):
    # The unit tier's files in every order Bazel could list them: each shard gets whole
    # files, no file twice or never.
    dealt = [shard_files(UNIT_FILES[::-1], (index, total)) for index in range(total)]
    assert sorted(name for files in dealt for name in files) == UNIT_FILES
    assert dealt == [shard_files(UNIT_FILES, (index, total)) for index in range(total)]


def test_a_shard_gets_its_files_and_every_flag():
    argv = ["--noconftest", "b/test_y.py", "a/test_x.py", "c/test_z.py"]
    environ = _sharded(1, 2, XML_OUTPUT_FILE="/out/test.xml")
    # Sorted a/test_x b/test_y c/test_z: shard 1 of 2 runs b/test_y alone.
    assert pytest_args(argv, environ) == [
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "b/test_y.py",
        "--junitxml=/out/test.xml",
    ]
    # Shard 3 of 4 gets no file, and pytest must not run (it would collect the testpaths).
    assert pytest_args(argv, _sharded(3, 4)) is None


def test_no_tests_collected_passes_in_a_shard_only():
    assert exit_status(5, _sharded(1, 2)) == 0  # Another shard may hold the filter's tests.
    assert exit_status(5, {}) == 5  # Unsharded, a filter that matches nothing fails.
    assert exit_status(1, _sharded(1, 2)) == 1
    assert exit_status(0, {}) == 0


# End to end: three files of two tests each (test_b's two fail), one of no tests.
SUITE = {
    "test_a.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    "test_b.py": "def test_one():\n    assert False\n\n\ndef test_two():\n    assert False\n",
    "test_c.py": "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    "test_d.py": "CONSTANT = 1\n",
}


def _run(tmp_path, files, **environ):
    """The runner's exit status and the tests its JUnit XML reports, as Bazel runs it."""
    for name, source in SUITE.items():
        (tmp_path / name).write_text(source)
    report = tmp_path / "test.xml"
    # Bazel's variables of this test itself (it may run under `bazel test`) are not the
    # child's; pytest's plugins are not loaded (this suite needs none).
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TEST_", "TESTBRIDGE_", "PYTEST_", "XML_OUTPUT_FILE"))
    }
    env.update(environ, XML_OUTPUT_FILE=str(report), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    status = subprocess.run(
        [sys.executable, str(RUNNER), *files],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    ran = []
    if report.exists():
        cases = ElementTree.parse(report).iter("testcase")
        ran = sorted(f"{case.get('classname')}.{case.get('name')}" for case in cases)
    return status.returncode, ran, status.stdout


@pytest.mark.subprocess
def test_a_shard_runs_its_files_and_touches_the_status_file(tmp_path):
    status_file = tmp_path / "shard_status"
    code, ran, _ = _run(
        tmp_path,
        ["test_c.py", "test_b.py", "test_a.py"],
        **_sharded(0, 2, TEST_SHARD_STATUS_FILE=str(status_file)),
    )
    # Sorted a b c: shard 0 of 2 runs test_a and test_c (four passing tests), not test_b.
    assert (code, ran) == (
        0,
        ["test_a.test_one", "test_a.test_two", "test_c.test_one", "test_c.test_two"],
    )
    assert status_file.exists()
    code, ran, _ = _run(tmp_path, ["test_c.py", "test_b.py", "test_a.py"], **_sharded(1, 2))
    assert (code, ran) == (1, ["test_b.test_one", "test_b.test_two"])


@pytest.mark.subprocess
def test_a_shard_without_tests_passes(tmp_path):
    status_file = tmp_path / "shard_status"
    # Shard 3 of 4 of three files: no file; pytest does not run, no report is written.
    code, ran, out = _run(
        tmp_path,
        ["test_a.py", "test_b.py", "test_c.py"],
        **_sharded(3, 4, TEST_SHARD_STATUS_FILE=str(status_file)),
    )
    assert (code, ran) == (0, [])
    assert "Shard 3 of 4: no test file" in out
    assert status_file.exists()
    # Sorted a d: shard 1 of 2 is test_d, which has no test: pytest's exit 5, a pass.
    code, ran, _ = _run(tmp_path, ["test_a.py", "test_d.py"], **_sharded(1, 2))
    assert (code, ran) == (0, [])
    # A filter that selects nothing in this shard (the tests of test_a are in shard 0).
    code, ran, _ = _run(
        tmp_path, ["test_a.py", "test_c.py"], **_sharded(1, 2, TESTBRIDGE_TEST_ONLY="test_a")
    )
    assert (code, ran) == (0, [])
    # Unsharded, the same filter on test_c alone selects nothing: a failure (exit 5).
    code, _, _ = _run(tmp_path, ["test_c.py"], TESTBRIDGE_TEST_ONLY="test_a")
    assert code == 5
