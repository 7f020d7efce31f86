"""Disks and ports gone bad, for the tests of easgd-train's answers to bad input on disk.

Checkpoints of a small model to damage (`build_variables`, `make_checkpoints`, `restore`,
`data_file`), tmpfs mounts that are read-only or fill up (`tmpfs_mounts`, behind the
`mount_tmpfs` fixture of tests/conftest.py; `fill`), and a port held by another socket
(`held_port`). The tests are tests/unit/test_bad_disk.py,
tests/subprocess/test_bad_disk_subprocess.py and tests/e2e/test_bad_disk_e2e.py.
"""

import contextlib
import os
import shutil
import socket
import subprocess

import pytest
import tensorflow as tf

from tf_contrib_easgd.trainer import files

VALUES = 64  # Floats per variable of the checkpoints made here.


def build_variables(num_variables=3, devices=("/cpu:0",)):
    """Variables `v<i>` (round robin on `devices`), `global_step`, the trainer's kind of saver.

    Returns:
        `(variables, global_step, saver)`, in the current graph.
    """
    variables = []
    for i in range(num_variables):
        with tf.compat.v1.device(devices[i % len(devices)]):
            variables.append(tf.compat.v1.get_variable(f"v{i}", [VALUES], tf.float32))
    with tf.compat.v1.device(devices[0]):
        step = tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver(sharded=True, max_to_keep=5, save_relative_paths=True)
    return variables, step, saver


def _session_config(devices):
    """A session with as many CPU devices as `devices` names."""
    return tf.compat.v1.ConfigProto(device_count={"CPU": len(devices)})


def make_checkpoints(model_dir, steps=(1, 2, 3), num_variables=3, devices=("/cpu:0",)):
    """Saves a checkpoint at each global step of `steps`; variable v<i> holds step * (i + 1).

    Args:
        model_dir: The directory of the checkpoints (and of their index file).
        steps: The global steps to save at, in order.
        num_variables: How many variables of VALUES floats the model has.
        devices: The devices the variables are put on, round robin: one data file each.

    Returns:
        The path prefixes, `model_dir/model.ckpt-<step>`.
    """
    prefixes = []
    with tf.Graph().as_default():
        variables, step, saver = build_variables(num_variables, devices)
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


def restore(model_dir, num_variables=3, devices=("/cpu:0",)):
    """Restores the latest checkpoint of `model_dir` as TensorFlow's chief would.

    Args:
        model_dir: A directory of checkpoints of `make_checkpoints`.
        num_variables: As given to `make_checkpoints`.
        devices: As given to `make_checkpoints`.

    Returns:
        `(global_step, value of v0)`.
    """
    with tf.Graph().as_default():
        variables, step, saver = build_variables(num_variables, devices)
        with tf.compat.v1.Session(config=_session_config(devices)) as session:
            saver.restore(session, tf.train.latest_checkpoint(model_dir))
            return int(session.run(step)), float(session.run(variables[0])[0])


def data_file(prefix):
    """The one data file of checkpoint `prefix` (saved on one device)."""
    return f"{prefix}.data-00000-of-00001"


@contextlib.contextmanager
def tmpfs_mounts(folder):
    """Mounts tmpfs file systems under `folder`: yields `mount(size, read_only=False)`.

    `mount` returns the new mount point, `folder/mount<i>`. It skips the test where
    mounting is impossible (not root, no `mount`, a container that forbids it); every file
    system mounted is unmounted however the block ends.
    """
    mounted = []

    def mount(size, read_only=False):
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root (and as root, permission bits stop no write)")
        if shutil.which("mount") is None:
            pytest.skip("no `mount` command")
        point = folder / f"mount{len(mounted)}"
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


def fill(directory):
    """Writes a file into `directory` until its file system is full; returns its size."""
    written = 0
    with contextlib.suppress(OSError), open(directory / "filler", "wb", buffering=0) as file:
        while True:
            written += file.write(b"\0" * 65536)
    # The last write may have stored part of its block: fill what is left.
    with contextlib.suppress(OSError), open(directory / "filler2", "wb", buffering=0) as file:
        while True:
            written += file.write(b"\0")
    return written


@contextlib.contextmanager
def held_port(host="127.0.0.1"):
    """A listening socket on a free port of `host`; yields the port."""
    with socket.socket() as holder:
        holder.bind((host, 0))
        holder.listen()
        yield holder.getsockname()[1]
