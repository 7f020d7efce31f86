"""Tests with a child process (a console script, a fresh interpreter): easgd-train
(tf_contrib_easgd.trainer.cli).

The tests of its other tiers are in tests/unit/test_train.py.
"""

import subprocess
import sys

import pytest
from processes import child_env as _env
from processes import easgd_train_script as _console_script

from tf_contrib_easgd.trainer import cli as train

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, three at once in
# ~30 s; training a few hundred steps adds seconds. No test here comes near these bounds
# unless something hangs.
PROCESS_TIMEOUT_SECS = 240


@pytest.mark.parametrize("module", [False, True], ids=["easgd-train --help", "python -m -h"])
def test_help_lists_every_flag_and_exits_0(module):
    # absl's help exits with 1, which easgd-train's exit codes reserve for "a task failed".
    command = (
        [sys.executable, "-m", "tf_contrib_easgd.trainer", "-h"]
        if module
        else [_console_script(), "--help"]
    )
    result = subprocess.run(
        command, capture_output=True, text=True, env=_env(), timeout=PROCESS_TIMEOUT_SECS,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("easgd-train: train a classifier with Elastic Averaging SGD")
    for name in train.FLAGS.get_key_flags_for_module(train):
        assert f"--{name.name}:" in result.stdout or f"--[no]{name.name}:" in result.stdout


def test_a_bad_tf_config_exits_with_code_2_before_anything_starts():
    result = subprocess.run(
        [sys.executable, "-m", "tf_contrib_easgd.trainer"], capture_output=True, text=True,
        env=_env(TF_CONFIG='{"cluster": 1}'), timeout=PROCESS_TIMEOUT_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "easgd-train: error: TF_CONFIG='{\"cluster\": 1}': expected an object" in (result.stderr)
    assert "started" not in result.stderr  # Nothing was started.
