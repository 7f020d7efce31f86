"""Tests with a child process (a console script, a fresh interpreter): easgd-train's answers
to bad input on disk and in the environment.

The tests of its other tiers are in tests/unit/test_bad_disk.py.
"""

import json
import os
import subprocess
import sys

import pytest
from bad_disks import data_file as _data_file
from bad_disks import held_port, make_checkpoints
from processes import child_env

from tf_contrib_easgd.trainer.config import EXIT_USAGE

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, a few at once in ~30 s.
DEADLINE_SECS = 240  # Of every wait on a process.


def _easgd_train(*args, env=None):
    """Runs `python -m tf_contrib_easgd.trainer ARGS`; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "tf_contrib_easgd.trainer", *args],
        capture_output=True, text=True, env=env or child_env(), timeout=DEADLINE_SECS,
        check=False,
    )  # fmt: skip


def test_bad_input_ends_the_command_line_with_code_2_before_anything_starts(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "bad").mkdir()
    make_checkpoints(tmp_path / "bad", steps=(1,))
    # A missing file, which the launcher finds without TensorFlow (a truncated one, only the
    # chief finds: test_a_checkpoint_only_tensorflow_can_read_ends_a_local_job_with_code_2).
    os.remove(_data_file(str(tmp_path / "bad" / "model.ckpt-1")))
    tf_config = json.dumps(
        {"cluster": {"worker": ["localhost:1"], "ps": ["localhost:2"]}, "task": {"type": "chief"}}
    )
    with held_port() as port:
        cases = {
            "model_dir under a file": (
                [f"--model_dir={tmp_path}/file/run1"], None,
                f"--model_dir='{tmp_path}/file/run1': cannot create the directory: {tmp_path}/"
                "file is a file, not a directory.",
            ),
            "no checkpoint restores": (
                [f"--model_dir={tmp_path}/bad"], None,
                f"--model_dir='{tmp_path}/bad': no checkpoint there restores: "
                f"{tmp_path}/bad/model.ckpt-1.data-00000-of-00001: is missing (a data file of "
                "the checkpoint). Nothing in the directory was changed",
            ),
            "port in use": (
                ["--job_name=ps", f"--ps_hosts=localhost:{port}", "--worker_hosts=localhost:1",
                 f"--model_dir={tmp_path}/ps"], None,
                f"ps 0 ('localhost:{port}' in --ps_hosts): port {port} is already in use",
            ),
            "TF_CONFIG task not in the cluster": (
                [f"--model_dir={tmp_path}/chief"], dict(child_env(), TF_CONFIG=tf_config),
                "TF_CONFIG task.type='chief': the cluster has no 'chief' task",
            ),
        }  # fmt: skip
        for case, (args, env, message) in cases.items():
            result = _easgd_train(*args, env=env)
            assert result.returncode == EXIT_USAGE, (case, result.stderr)
            assert result.stderr.startswith(f"easgd-train: error: {message}"), (case, result.stderr)
            assert "started" not in result.stderr and "serving" not in result.stdout, case


@pytest.mark.root
def test_a_read_only_model_dir_ends_the_command_line_with_code_2(mount_tmpfs):
    point = mount_tmpfs("1m", read_only=True)
    result = _easgd_train("--steps=10", f"--model_dir={point}")
    assert result.returncode == EXIT_USAGE
    assert result.stderr == (
        f"easgd-train: error: --model_dir='{point}': cannot write there: Read-only file system. "
        "Checkpoints, the export, events and summary.json go there.\n"
    )
