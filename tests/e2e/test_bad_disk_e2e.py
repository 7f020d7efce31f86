"""End-to-end tests (ps and worker OS processes): easgd-train's answers to bad input on disk
and in the environment.

The tests of its other tiers are in tests/unit/test_bad_disk.py.
"""

import os
import re
import shutil
import subprocess

import pytest
import tensorflow as tf
from bad_disks import data_file as _data_file
from bad_disks import fill
from processes import child_env, easgd_train_tasks
from processes import easgd_train_script as _console_script

from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.runner.display import parse_event
from tf_contrib_easgd.trainer import checkpoints, files
from tf_contrib_easgd.trainer.config import EXIT_FAILED, EXIT_USAGE

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, a few at once in ~30 s.
DEADLINE_SECS = 240  # Of every wait on a process.
# The tests that copy `trained_dir` share its job: under pytest-xdist (`make test`) the group
# keeps them on one worker, so the job runs once.
SHARES_TRAINED_DIR = pytest.mark.xdist_group("bad_disk_trained_dir")


def _checkpoint_files(directory):
    """`{name: bytes}` of the index file and the checkpoints' files in `directory`."""
    return {
        name: (directory / name).read_bytes()
        for name in sorted(os.listdir(directory))
        if name == checkpoints.STATE_FILE or name.startswith(files.CHECKPOINT_PREFIX)
    }


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    """The `--model_dir` of a short local job: checkpoints every 20 chief steps, 3 of them."""
    model_dir = tmp_path_factory.mktemp("trained")
    result = subprocess.run(
        [
            _console_script(), "--steps=60", "--save_checkpoint_steps=20", "--log_every_steps=60",
            "--eval_every_steps=0", f"--model_dir={model_dir}", "--timeout_secs=120",
        ],
        capture_output=True, text=True, env=child_env(), timeout=DEADLINE_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    shutil.rmtree(model_dir / "logs")
    return model_dir


@SHARES_TRAINED_DIR
def test_a_truncated_latest_checkpoint_falls_back_end_to_end(trained_dir, tmp_path):
    model_dir = tmp_path / "run"
    shutil.copytree(trained_dir, model_dir)
    latest, listed = checkpoints.read_state(str(model_dir))
    assert len(listed) == 3  # At chief steps 20, 40 and 60 (the last one at the end).
    previous = listed[-2]
    os.truncate(_data_file(latest), 1000)
    result = subprocess.run(
        [
            _console_script(), "--steps=20", "--log_every_steps=20", "--eval_every_steps=0",
            f"--model_dir={model_dir}", "--timeout_secs=120",
        ],
        capture_output=True, text=True, env=child_env(), timeout=DEADLINE_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Cut at 1000 bytes, inside some variable of the model: the first one (by name) after
    # global_step whose bytes do not all fit.
    assert re.search(
        f"worker 0: warning: checkpoint {re.escape(latest)} cannot be used: "
        f"{re.escape(_data_file(latest))}: tensor '[^']+': Read less bytes than requested. ",
        result.stderr,
    ), result.stderr
    assert f"Restoring the previous good checkpoint {previous} instead" in result.stderr
    # The chief restored the previous checkpoint: its "started" event (in its log, as JSON)
    # says so, with global_step as read right after the restore, the step in the name.
    with open(model_dir / "logs" / "worker_0.log", encoding="utf-8") as log:
        events = [parse_event(line) for line in log]
    started = next(e for e in events if e and e["event"] == "started")
    assert started["restored_from"] == os.path.basename(previous)
    # global_step is read right after the restore; worker 1 may exchange in between (TF 2.15
    # in CI read 9 after restoring model.ckpt-8), so the checkpoint's step is a lower bound.
    assert started["restored_global_step"] >= checkpoints.checkpoint_step(previous)
    assert os.path.exists(_data_file(latest) + ".unusable")


@SHARES_TRAINED_DIR
def test_a_checkpoint_only_tensorflow_can_read_ends_a_local_job_with_code_2(trained_dir, tmp_path):
    # Every checkpoint's data file truncated: all files are there, so the launcher's TF-free
    # check lets the job start; the chief reads them before its server starts, finds none
    # that restores, and exits 2, which the launcher passes on.
    model_dir = tmp_path / "run"
    shutil.copytree(trained_dir, model_dir)
    _, listed = checkpoints.read_state(str(model_dir))
    for prefix in listed:
        os.truncate(_data_file(prefix), 1000)
    before = _checkpoint_files(model_dir)
    result = subprocess.run(
        [
            _console_script(), "--workers=1", "--steps=20", "--eval_every_steps=0",
            f"--model_dir={model_dir}", "--timeout_secs=120",
        ],
        capture_output=True, text=True, env=child_env(), timeout=DEADLINE_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE, result.stderr
    assert "easgd-train: started worker 0, pid " in result.stderr  # The launcher's check passed.
    assert (
        "easgd-train: error: worker 0 exited with code 2; every other task was stopped. Its "
        "last lines:\n" in result.stderr
    )
    # Newest first, each named with the tensor that does not read.
    bad = "; ".join(
        f"{re.escape(_data_file(p))}: tensor '[^']+': Read less bytes than requested"
        for p in reversed(listed)
    )
    assert re.search(
        f"  \\| easgd-train: worker 0: error: --model_dir={re.escape(repr(str(model_dir)))}: no "
        f"checkpoint there restores: {bad}\\. Nothing in the directory was changed",
        result.stderr,
    ), result.stderr
    assert _checkpoint_files(model_dir) == before  # Nothing renamed, nothing rewritten.


@SHARES_TRAINED_DIR
def test_a_checkpoint_of_another_model_ends_a_local_job_with_code_2(trained_dir, tmp_path):
    # The checkpoints of an MLP with 2 workers, and --model=cnn --workers=1: the chief finds
    # before its first session that the CNN's variables are not there and that the work
    # ledger has another shape, and exits 2; the launcher does not restart it (bad input),
    # and the error shows the chief's message, not TensorFlow's start-up lines.
    model_dir = tmp_path / "run"
    shutil.copytree(trained_dir, model_dir)
    before = _checkpoint_files(model_dir)
    result = subprocess.run(
        [
            _console_script(), "--model=cnn", "--workers=1", "--steps=20", "--max_restarts=2",
            "--eval_every_steps=0", f"--model_dir={model_dir}", "--timeout_secs=120",
        ],
        capture_output=True, text=True, env=child_env(), timeout=DEADLINE_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.count("easgd-train: started worker 0, pid ") == 1, result.stderr
    latest = tf.train.latest_checkpoint(str(model_dir))
    # The CNN has 8 variables (2 conv and 2 dense layers, a kernel and a bias each), none
    # in the MLP's checkpoint; sorted, the first four are the conv layers'.
    centre = "global_center_variable/cnn"
    assert (
        "easgd-train: error: worker 0 exited with code 2; every other task was stopped. Its "
        "last lines:\n"
        f"  | easgd-train: worker 0: error: the checkpoint {latest} in --model_dir was written "
        f"by another job: 8 variable(s) of this job are not in it ({centre}/conv_0/bias, "
        f"{centre}/conv_0/kernel, {centre}/conv_1/bias, {centre}/conv_1/kernel and 4 more); "
        "2 have another shape (easgd_train/acknowledged [2] there, [1] here, "
        "easgd_train/local_steps [2] there, [1] here). Run with the flags it was written "
        "with (--model, --dataset, --workers), or give a new --model_dir.\nWhole output: "
    ) in result.stderr
    assert _checkpoint_files(model_dir) == before


@pytest.mark.root
def test_a_full_disk_during_a_save_fails_the_chief_end_to_end(mount_tmpfs):
    model_dir = mount_tmpfs("8m") / "run1"
    # A ps and the chief: the chief checkpoints every 20 of its steps until the disk is full.
    tasks = easgd_train_tasks(
        ("--steps=1000000", "--save_checkpoint_steps=20", "--log_every_steps=10",
         "--eval_every_steps=0", f"--model_dir={model_dir}", "--timeout_secs=60"),
        tasks=(("ps", 0), ("worker", 0)), num_workers=1,
    )  # fmt: skip
    lines = []
    state_file = model_dir / checkpoints.STATE_FILE
    with launcher.LocalCluster(
        tasks, env=child_env(), on_line=lambda spec, line: lines.append(line)
    ) as job:
        job.start()
        saved = job.wait_for_line(lambda spec, line: state_file.exists(), DEADLINE_SECS)
        assert saved, "\n".join(lines)
        fill(model_dir.parent)
        before = tf.train.latest_checkpoint(str(model_dir))
        with pytest.raises(launcher.TaskFailedError) as caught:
            job.supervise()
    assert caught.value.task.name == "worker 0" and caught.value.returncode == EXIT_FAILED
    message = next(line for line in lines if line.startswith("easgd-train: worker 0: error:"))
    assert message.startswith(
        f"easgd-train: worker 0: error: could not write a checkpoint to {model_dir}: No space "
        "left on device (ResourceExhaustedError); the latest checkpoint is still "
    )
    # The checkpoint that was the latest when the disk filled still is, and restores.
    assert tf.train.latest_checkpoint(str(model_dir)) == before
    assert message.endswith(f"still {before}.")
    assert checkpoints.full_problem(before) is None
