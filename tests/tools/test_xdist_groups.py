"""The e2e tier's shared runs stay on one pytest-xdist worker (`--dist loadgroup`).

Tests that share a costly module fixture (the contrib oracle's TF 1.15 run, one Slurm, the
Keras yardstick) name an `xdist_group`; `make test` runs tests/e2e with `--dist loadgroup`,
which must send every test of a group to one worker. pytest 9.2's structured node ids
silently undo that with pytest-xdist 3.8 (pytest-dev/pytest-xdist#1386: the tests are dealt
out one by one, and each worker runs the shared fixture again), which is why setup.py caps
pytest. This test runs a small suite of both ways of naming a group (a decorator on a
parametrized test, a module's `pytestmark`) the way `make test` runs tests/e2e.
"""

import collections
import subprocess
import sys
import textwrap

import pytest

# Each test appends "<its file> <the xdist worker that ran it>" to a log.
_RECORD = """
import os
import pathlib


def record(log, name):
    with open(pathlib.Path(log), "a") as out:
        out.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""


@pytest.mark.subprocess
def test_every_test_of_a_group_runs_on_one_worker(tmp_path):
    log = tmp_path / "ran.log"
    (tmp_path / "record.py").write_text(_RECORD)
    (tmp_path / "test_decorated.py").write_text(
        textwrap.dedent(f"""
            import pytest
            from record import record

            def test_alone():
                record({str(log)!r}, "alone")

            @pytest.mark.xdist_group("shared")
            @pytest.mark.parametrize("case", range(12))
            def test_grouped(case):
                record({str(log)!r}, "decorated")
        """)
    )
    (tmp_path / "test_module_mark.py").write_text(
        textwrap.dedent(f"""
            import pytest
            from record import record

            pytestmark = pytest.mark.xdist_group("shared")

            @pytest.mark.parametrize("case", range(12))
            def test_grouped(case):
                record({str(log)!r}, "module")
        """)
    )
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    workers = collections.defaultdict(set)
    ran = collections.Counter()
    for line in log.read_text().splitlines():
        name, worker = line.split()
        workers[name].add(worker)
        ran[name] += 1
    assert ran == {"alone": 1, "decorated": 12, "module": 12}
    # 24 tests of one group on one worker: dealt out one by one, both workers get some.
    assert len(workers["decorated"] | workers["module"]) == 1, dict(workers)
