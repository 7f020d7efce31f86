"""Tests with a child process (a console script, a fresh interpreter):
tf_contrib_easgd.trainer.process, a run's start and re-execution.

The tests of its other tiers are in tests/unit/test_process.py.
"""

import subprocess
import sys
import textwrap

DEADLINE_SECS = 60


FIRST_RUN_SECS = 4.0  # How long the child's first run lasts before it re-executes itself.


def test_restart_this_process_runs_the_command_line_again_in_the_same_process(tmp_path):
    # The first run records its pid, waits FIRST_RUN_SECS and re-executes itself; the second
    # (the environment variable is set) prints its pid, its arguments and its age. Its age
    # counts from the re-execution: under FIRST_RUN_SECS, though /proc's start time, the
    # first run's, is more than FIRST_RUN_SECS ago.
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            from tf_contrib_easgd.trainer import process
            if process.RESTARTED_AT_ENV not in os.environ:
                print("first", os.getpid(), flush=True)
                time.sleep({FIRST_RUN_SECS})
                process.restart_this_process()
            age = time.monotonic() - process.started_at()
            print("second", os.getpid(), sys.argv[1:], round(age, 3), flush=True)
            """
        )
    )
    result = subprocess.run(
        [sys.executable, str(script), "--flag=1"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECS,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    first_pid = first.split()[1]
    assert second.startswith(f"second {first_pid} ['--flag=1'] ")
    assert float(second.split()[-1]) < FIRST_RUN_SECS
