"""Helpers of the tests that migrate TF1 scripts and run them as real ps/worker jobs.

A user's path, step by step: copy the unconverted script, run TensorFlow's `tf_upgrade_v2`
and then `easgd-migrate` as the console script of the venv, then start one OS process per
task on free loopback ports, as the scripts' own docstrings tell a user to. `tf_upgrade_v2`
runs in the test's process, as its console script's code does with its default options: a
child would import TensorFlow again (10-15 s) for a converter that needs none of it.
"""

import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import portpicker
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LEGACY_DIR = ROOT / "examples" / "legacy_tf1"
BIN = pathlib.Path(sys.executable).parent  # The venv's console scripts live beside python.

# Importing TensorFlow takes 10-15 s per process on a 2-core machine; a tool run is one.
TOOL_TIMEOUT_S = 120


# Source text -> tf_upgrade_v2's converter's output: it depends on the text alone, and
# several tests of a process convert the same example.
_UPGRADED = {}


def upgrade_v2_source(source, tmp_path):
    """Runs tf_upgrade_v2's converter on `source` in this process; returns the new text."""
    if source not in _UPGRADED:
        from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2  # noqa: PLC0415

        before, after = tmp_path / "before.py", tmp_path / "after.py"
        before.write_text(source)
        upgrader = ast_edits.ASTCodeUpgrader(tf_upgrade_v2.TFAPIChangeSpec())
        upgrader.process_file(str(before), str(after))
        _UPGRADED[source] = after.read_text()
    return _UPGRADED[source]


def migrate_source(source):
    """Runs easgd-migrate's conversion on `source` in this process; returns the new text.

    Asserts that nothing was left unconverted.
    """
    migration = _migration(source)
    assert not [f for f in migration.findings if f.unconverted]
    return migration.code


@functools.cache
def _migration(source):
    """easgd-migrate's `Migration` of `source`, once per text (it depends on nothing else)."""
    from tf_contrib_easgd.migrate import codemod  # noqa: PLC0415

    return codemod.migrate_source(source)


#: The legacy trainer's data split: the first 1500 digits train, the other 297 test.
TRAINER_NUM_TRAIN = 1500


def trainer_centre(checkpoint_dir):
    """(global_step, test accuracy) of the trainer's centre in the latest checkpoint.

    The chief of examples/legacy_tf1/trainer.py (and of its migrated form) saves the centre
    under the plain variable names; a numpy forward pass of its MLP evaluates it.
    """
    import numpy as np  # noqa: PLC0415 (the tool helpers above need neither)
    import tensorflow as tf  # noqa: PLC0415
    from sklearn.datasets import load_digits  # noqa: PLC0415

    reader = tf.train.load_checkpoint(str(checkpoint_dir))
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)[TRAINER_NUM_TRAIN:]
    labels = digits.target[TRAINER_NUM_TRAIN:]
    hidden = np.maximum(images @ reader.get_tensor("mlp/w1") + reader.get_tensor("mlp/b1"), 0)
    logits = hidden @ reader.get_tensor("mlp/w2") + reader.get_tensor("mlp/b2")
    accuracy = float(np.mean(logits.argmax(axis=1) == labels))
    return int(reader.get_tensor("global_step")), accuracy


def run_tool(args, cwd, expect_status=0):
    """Runs a console script to completion within TOOL_TIMEOUT_S.

    Args:
        args: the command line.
        cwd: the folder to run it in.
        expect_status: the exit status the run must end with.

    Returns:
        The `subprocess.CompletedProcess` (text stdout and stderr).
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False
    )
    assert done.returncode == expect_status, (
        f"{args} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )
    return done


def _console_upgrader():
    """tf_upgrade_v2's converter as its console script makes it without options."""
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2  # noqa: PLC0415

    spec = tf_upgrade_v2.TFAPIChangeSpec(import_rename=False, upgrade_compat_v1_import=True)
    return ast_edits.ASTCodeUpgrader(spec)


def upgrade_v2(path):
    """Converts the file `path` in place as `tf_upgrade_v2 --infile P --outfile P` does.

    Returns:
        The converter's report.
    """
    _, report, errors = _console_upgrader().process_file(str(path), str(path))
    # The console script exits 0 even when it could not parse the file (it then writes
    # nothing); its errors also list every tf.contrib use, which easgd-migrate converts.
    assert not _parse_failures(errors), errors
    assert path.read_text().strip(), f"tf_upgrade_v2 emptied {path}"
    return report


def _parse_failures(errors):
    return [error for error in errors if "Failed to parse" in error]


def upgrade_v2_tree(intree, outtree):
    """Converts the folder `intree` into `outtree` as `tf_upgrade_v2 --intree --outtree`
    does (other files copied too); asserts that every file was parsed."""
    _, _, errors = _console_upgrader().process_tree(str(intree), str(outtree), True)
    assert not [f for f, found in errors.items() if _parse_failures(found)], errors


def migrate(paths, cwd, expect_status=0):
    """Runs `easgd-migrate --nobackup` on `paths`; returns its stderr (the report)."""
    args = [str(BIN / "easgd-migrate"), "--nobackup", *map(str, paths)]
    return run_tool(args, cwd, expect_status).stderr


class Processes:
    """The OS processes of one test, each logging to a file; all killed by `kill_all`."""

    def __init__(self, directory):
        self._directory = directory
        self.running = {}

    def start(self, name, args, env=None):
        """Starts `args` as process `name`, its stdout and stderr going to `name.log`.

        Args:
            name: the process's name in this test.
            args: the command line.
            env: extra environment variables.

        Returns:
            The `subprocess.Popen`.
        """
        log = self._directory / f"{name}.log"
        environment = dict(
            os.environ,
            TF_CPP_MIN_LOG_LEVEL="2",
            PYTHONUNBUFFERED="1",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        )
        environment.pop("TF_CONFIG", None)  # Only a task given one in `env` has one.
        environment.update(env or {})
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                cwd=self._directory,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.running[name] = (process, log)
        return process

    def log(self, name):
        """Everything process `name` has written so far."""
        return self.running[name][1].read_text(errors="replace")

    def wait_for_line(self, name, pattern, timeout):
        """Waits until `name` logs a line matching `pattern`; fails if it exits or times out."""
        process, _ = self.running[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log(name), re.MULTILINE):
                return
            if process.poll() is not None:
                pytest.fail(f"{name} exited with {process.returncode}:\n{self.log(name)[-3000:]}")
            time.sleep(0.25)
        pytest.fail(f"{name} did not log {pattern!r} within {timeout} s:\n{self.log(name)[-3000:]}")

    def wait_for_exit(self, name, deadline):
        """Waits for `name` to exit 0 by `deadline` (time.monotonic()); returns its log."""
        process, _ = self.running[name]
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} still running at the deadline:\n{self.log(name)[-3000:]}")
        assert process.returncode == 0, f"{name} failed:\n{self.log(name)[-3000:]}"
        return self.log(name)

    def kill_all(self):
        """Kills every process still running (a ps always is) and reaps them all."""
        for process, _ in self.running.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)

    def run_tf_config_job(self, script, flags, chief_ready_timeout, training_timeout):
        """Runs `script` as a ps, the chief and a worker, each told its task by `TF_CONFIG`.

        The worker starts once the chief logs its first checkpoint (the model is then
        initialised): an Estimator's non-chief that finds it not yet initialised looks again
        only 30 s later. The ps never returns from `train_and_evaluate`; `kill_all` stops it.

        Args:
            script: the script's file name, in this object's folder.
            flags: the flags every task gets.
            chief_ready_timeout: seconds the chief may take to write its first checkpoint.
            training_timeout: seconds the chief and the worker may take after that to exit 0.

        Returns:
            {"chief": its log, "worker": its log}.
        """
        ports = {job: portpicker.pick_unused_port() for job in ("chief", "worker", "ps")}
        cluster = {job: [f"localhost:{port}"] for job, port in ports.items()}
        for job in ("ps", "chief", "worker"):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}})
            if job == "worker":
                self.wait_for_line("chief", r"Saving checkpoints for 0 ", chief_ready_timeout)
            self.start(job, [sys.executable, script, *flags], env={"TF_CONFIG": tf_config})
        deadline = time.monotonic() + training_timeout
        return {job: self.wait_for_exit(job, deadline) for job in ("chief", "worker")}

    def run_ps_and_two_workers(self, script, flags, chief_ready_timeout, training_timeout):
        """Runs `script` as one ps and two workers on free loopback ports, as its docs say.

        Worker 1 starts once the chief logs "Worker 0: session ready": a non-chief that
        finds the centre not initialised yet looks again only 30 s later. The ps only ever
        `join()`s; `kill_all` stops it.

        Args:
            script: the script's file name, in this object's folder.
            flags: the flags every task gets besides the cluster's.
            chief_ready_timeout: seconds the chief may take to log that its session is ready.
            training_timeout: seconds both workers may take after that to exit 0.

        Returns:
            The two workers' logs.
        """
        ports = [portpicker.pick_unused_port() for _ in range(3)]
        common = [
            sys.executable,
            script,
            f"--ps_hosts=localhost:{ports[0]}",
            f"--worker_hosts=localhost:{ports[1]},localhost:{ports[2]}",
            *flags,
        ]
        self.start("ps", [*common, "--job_name=ps", "--task_index=0"])
        self.start("worker0", [*common, "--job_name=worker", "--task_index=0"])
        self.wait_for_line("worker0", r"^Worker 0: session ready", chief_ready_timeout)
        self.start("worker1", [*common, "--job_name=worker", "--task_index=1"])
        deadline = time.monotonic() + training_timeout
        return [self.wait_for_exit(f"worker{index}", deadline) for index in (0, 1)]
