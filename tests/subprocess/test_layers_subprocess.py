"""Tests with a child process (a console script, a fresh interpreter): the package's layers
(imports go one way; TensorFlow loads when used).

The tests of its other tiers are in tests/unit/test_layers.py.
"""

import subprocess
import sys

import pytest

TOOL_TIMEOUT_SECS = 120


def _loads_tensorflow(code):
    """Whether running `code` in a fresh interpreter imports TensorFlow."""
    probe = f"{code}\nimport sys\nprint('tensorflow' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECS,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.parametrize(
    "code",
    [
        "import tf_contrib_easgd",
        "import tf_contrib_easgd.keras",
        "import tf_contrib_easgd.migrate.cli",
        "import tf_contrib_easgd.trainer.cli",
        "from tf_contrib_easgd.trainer import cluster, config, data, files",
        "from tf_contrib_easgd.runner import isolation, launcher, local",
        "from tf_contrib_easgd.trainer import progress",
    ],
)
def test_tensorflow_is_not_imported_until_a_name_needs_it(code):
    assert not _loads_tensorflow(code)


def test_a_library_name_imports_tensorflow():
    assert _loads_tensorflow("from tf_contrib_easgd import ElasticAverageOptimizer")


@pytest.mark.parametrize("program", ["trainer", "migrate"])
def test_help_imports_no_tensorflow_and_logs_nothing(program):
    # `--help` answers from the flags alone: no TensorFlow, so no CUDA or oneDNN lines.
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['easgd', '--help']\n"
        "try:\n"
        f"    runpy.run_module('tf_contrib_easgd.{program}', run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print('tensorflow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECS,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert "--" in done.stdout  # The flags are listed.
    assert done.stderr == ""
