"""Tests with a child process (a console script, a fresh interpreter): easgd-train's answers
to bad input on disk and in the environment.

The tests of its other tiers are in tests/unit/test_bad_disk.py.
"""

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import tensorflow as tf
from processes import child_env

from tf_contrib_easgd.trainer import (
    files,
)
from tf_contrib_easgd.trainer.config import EXIT_USAGE

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, a few at once in ~30 s.
DEADLINE_SECS = 240  # Of every wait on a process.


VALUES = 64  # Floats per variable of the checkpoints made here.


def _build(num_variables=3, devices=("/cpu:0",)):
    """Variables `v<i>` (round robin on `devices`), `global_step`, the trainer's kind of saver."""
    variables = []
    for i in range(num_variables):
        with tf.compat.v1.device(devices[i % len(devices)]):
            variables.append(tf.compat.v1.get_variable(f"v{i}", [VALUES], tf.float32))
    with tf.compat.v1.device(devices[0]):
        step = tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver(sharded=True, max_to_keep=5, save_relative_paths=True)
    return variables, step, saver


def _session_config(devices):
    return tf.compat.v1.ConfigProto(device_count={"CPU": len(devices)})


def make_checkpoints(model_dir, steps=(1, 2, 3), num_variables=3, devices=("/cpu:0",)):
    """Saves a checkpoint at each global step of `steps`; variable v<i> holds step * (i + 1).

    Returns:
        The path prefixes, `model_dir/model.ckpt-<step>`.
    """
    prefixes = []
    with tf.Graph().as_default():
        variables, step, saver = _build(num_variables, devices)
        with tf.compat.v1.Session(config=_session_config(devices)) as session:
            for value in steps:
                for i, variable in enumerate(variables):
                    variable.load([value * (i + 1.0)] * VALUES, session)
                step.load(value, session)
                prefix = os.path.join(model_dir, files.CHECKPOINT_PREFIX)
                prefixes.append(
                    saver.save(session, prefix, global_step=step, write_meta_graph=False)
                )
    return prefixes


def _data_file(prefix):
    """The one data file of checkpoint `prefix` (saved on one device)."""
    return f"{prefix}.data-00000-of-00001"


@pytest.fixture
def mount_tmpfs(tmp_path):
    """Mounts tmpfs file systems under `tmp_path`: `mount_tmpfs(size, read_only=False)`.

    Skips the test where that is impossible (not root, no `mount`, a container that forbids
    it); unmounts everything it mounted however the test ends.
    """
    mounted = []

    def mount(size, read_only=False):
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root (and as root, permission bits stop no write)")
        if shutil.which("mount") is None:
            pytest.skip("no `mount` command")
        point = tmp_path / f"mount{len(mounted)}"
        point.mkdir()
        options = f"size={size}" + (",ro" if read_only else "")
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            pytest.skip(f"`mount -t tmpfs` failed here: {result.stderr.strip()}")
        mounted.append(point)
        return point

    try:
        yield mount
    finally:
        for point in reversed(mounted):
            if subprocess.run(["umount", str(point)], timeout=30, check=False).returncode:
                subprocess.run(["umount", "-l", str(point)], timeout=30, check=False)


@contextlib.contextmanager
def held_port(host="127.0.0.1"):
    """A listening socket on a free port of `host`; yields the port."""
    with socket.socket() as holder:
        holder.bind((host, 0))
        holder.listen()
        yield holder.getsockname()[1]


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
