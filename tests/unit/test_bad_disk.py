"""Bad input on disk and in the environment: easgd-train names the file, port or key, exits
non-zero, and loses no checkpoint (docs/RELIABILITY.md, "Bad input on disk and in the
environment").

The cases: a truncated, corrupt or missing checkpoint in `--model_dir` (and an index file
`checkpoint` that is unreadable or names a checkpoint that is not there); a `--model_dir`
that cannot be written; a full disk during a save; a task's port held by another socket; a
TF_CONFIG task that is not in its cluster. A checkpoint is checked in two ways:
`checkpoints.index_problem`, without TensorFlow, that its files are there (what the local
launcher checks before it starts any task), and `checkpoints.full_problem`, which also
reads every tensor with TensorFlow's reader (what the chief checks before its server
starts): only that one finds a truncated or corrupt file.

Most tests check the pieces in this process (`checkpoints`, `preflight`, `export`,
`task.check_checkpoints`); tests/subprocess/test_bad_disk_subprocess.py runs the command
line, which fails before it starts any TensorFlow server, and tests/e2e/test_bad_disk_e2e.py
runs real jobs. Tests that
mount a tmpfs (a read-only directory, a full disk: as root, permission bits stop no write)
need root and `mount`; they skip with the reason otherwise and always unmount.
"""

import io
import json
import os
import re
import socket
import tempfile
import types

import pytest
import tensorflow as tf
from bad_disks import VALUES, fill, held_port, make_checkpoints, restore
from bad_disks import build_variables as _build
from bad_disks import data_file as _data_file

from tf_contrib_easgd.cluster import tf_config
from tf_contrib_easgd.runner import local
from tf_contrib_easgd.trainer import (
    checkpoint_fit,
    checkpoints,
    cluster,
    export,
    files,
    preflight,
    progress,
    task,
)
from tf_contrib_easgd.trainer.config import UsageError


def _listing(directory):
    """`{name: bytes}` of every file in `directory`: to show that nothing changed."""
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_a_checkpoint_of_two_data_files_is_checked_file_by_file(tmp_path):
    # 4 variables on two devices: v0, v2 and global_step in the first data file, v1 and v3
    # in the second (256 bytes each, global_step 8: files of 520 and 512 bytes).
    devices = ("/cpu:0", "/cpu:1")
    (prefix,) = make_checkpoints(tmp_path, steps=(5,), num_variables=4, devices=devices)
    shards = [f"{prefix}.data-0000{i}-of-00002" for i in range(2)]
    assert [os.path.getsize(shard) for shard in shards] == [2 * 256 + 8, 2 * 256]
    assert checkpoints.index_problem(prefix) is None
    assert checkpoints.full_problem(prefix) is None
    assert restore(tmp_path, num_variables=4, devices=devices) == (5, 5.0)
    # Truncated: TensorFlow's reader says which tensor, not which file; both are named.
    # It reads in the order of the names: global_step and v0 (first file) read, v1 (the
    # second file's bytes 0-255, cut at 100) does not.
    os.truncate(shards[1], 100)
    assert checkpoints.index_problem(prefix) is None
    problem = checkpoints.full_problem(prefix)
    assert problem.path == ", ".join(shards)
    assert problem.reason.startswith("tensor 'v1': "), problem.reason
    # Missing: the TF-free check names the file, from the shard count in the others' names.
    os.remove(shards[1])
    assert str(checkpoints.index_problem(prefix)) == (
        f"{shards[1]}: is missing (a data file of the checkpoint)"
    )


# What is done to the latest checkpoint, and what is said about it (a regular expression).
# Its data file holds, in the order of their names, global_step (bytes 0-7) and v0, v1, v2
# (256 bytes each: 8-263, 264-519, 520-775); its index is a table that ends with a footer
# of 48 bytes.
#
# Damage only TensorFlow's reader sees (`content_problem`): the files are all there, so
# `index_problem`, the launcher's TF-free check, finds nothing.
_UNREADABLE = {
    # Cut inside v0: global_step reads, v0 is the first tensor that does not.
    "data truncated": (
        lambda p: os.truncate(_data_file(p), 100),
        r"model.ckpt-3.data-00000-of-00001: tensor 'v0': Read less bytes than requested$",
    ),
    # Cut inside v2: the first three tensors read.
    "data truncated at the end": (
        lambda p: os.truncate(_data_file(p), 700),
        r"model.ckpt-3.data-00000-of-00001: tensor 'v2': Read less bytes than requested$",
    ),
    "index garbage": (
        lambda p: open(p + ".index", "wb").write(b"not an index " * 10),  # noqa: SIM115
        r"model.ckpt-3.index: not an sstable \(bad magic number\)$",
    ),
    # 30 bytes: shorter than the footer.
    "index truncated": (
        lambda p: os.truncate(p + ".index", 30),
        r"model.ckpt-3.index: file is too short to be an sstable$",
    ),
}


# Missing files, which `index_problem` finds without TensorFlow (and so `full_problem`,
# before it reads anything).
_MISSING = {
    "data missing": (
        lambda p: os.remove(_data_file(p)),
        r"model.ckpt-3.data-00000-of-00001: is missing \(a data file of the checkpoint\)$",
    ),
    "index missing": (
        lambda p: os.remove(p + ".index"),
        r"model.ckpt-3.index: is missing \(the index of the checkpoint\)$",
    ),
    "all gone": (
        lambda p: [os.remove(p + ".index"), os.remove(_data_file(p))],
        r"model.ckpt-3.index: does not exist, nor any other file of the checkpoint$",
    ),
}


def _damaged_latest(tmp_path, do):
    """Makes checkpoints 1-3 in `tmp_path`, does `do` to the latest; returns its prefix."""
    *_, latest = make_checkpoints(tmp_path)
    assert os.path.getsize(_data_file(latest)) == 3 * VALUES * 4 + 8
    assert os.path.getsize(latest + ".index") > 48  # The table's footer, and more.
    do(latest)
    return latest


def _assert_names(problem, latest, message):
    """`problem` is about checkpoint `latest`, names a file of it, and says `message`."""
    assert problem is not None and problem.checkpoint == latest
    assert problem.path.startswith(latest + "."), problem.path
    assert re.search(message, str(problem)), str(problem)


@pytest.mark.parametrize("damage", sorted(_UNREADABLE))
def test_tensorflows_reader_names_the_file_it_cannot_read(tmp_path, damage):
    do, message = _UNREADABLE[damage]
    latest = _damaged_latest(tmp_path, do)
    assert checkpoints.index_problem(latest) is None
    _assert_names(checkpoints.full_problem(latest), latest, message)


@pytest.mark.parametrize("damage", sorted(_MISSING))
def test_a_missing_file_is_named_without_tensorflow(tmp_path, damage):
    do, message = _MISSING[damage]
    latest = _damaged_latest(tmp_path, do)
    problem = checkpoints.index_problem(latest)
    _assert_names(problem, latest, message)
    assert checkpoints.full_problem(latest) == problem


def test_a_corrupt_tensor_of_the_right_size_is_found_by_reading_it(tmp_path):
    # One flipped byte keeps every size: only the tensor's checksum tells. The data file holds
    # the tensors in the order of their names: global_step (bytes 0-7), v0 (8-263), ...
    *_, latest = make_checkpoints(tmp_path)
    with open(_data_file(latest), "r+b") as file:
        file.seek(100)
        byte = file.read(1)
        file.seek(100)
        file.write(bytes([byte[0] ^ 0xFF]))
    assert checkpoints.index_problem(latest) is None
    problem = checkpoints.full_problem(latest)
    assert problem is not None and problem.path == _data_file(latest)
    assert "tensor 'v0'" in problem.reason and "hecksum" in problem.reason, problem.reason


def test_a_good_latest_checkpoint_is_restored_as_tensorflow_would(tmp_path):
    *_, latest = make_checkpoints(tmp_path)
    before = _listing(tmp_path)
    choice = checkpoints.choose(str(tmp_path), checkpoints.full_problem)
    assert choice.ok and choice.restore == latest
    assert _listing(tmp_path) == before


def test_a_truncated_latest_checkpoint_falls_back_to_the_previous_good_one(tmp_path):
    first, second, latest = make_checkpoints(tmp_path)
    os.truncate(_data_file(latest), 100)
    bad_files = {
        name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path) if "ckpt-3" in name
    }
    # The launcher's TF-free check sees all files there; the chief's reads them.
    assert checkpoints.choose(str(tmp_path)) == checkpoints.Choice(str(tmp_path), latest)
    choice = checkpoints.choose(str(tmp_path), checkpoints.full_problem)
    assert (choice.restore, choice.keep_listed) == (second, (first,))
    assert [p.checkpoint for p in choice.problems] == [latest]
    renamed = checkpoints.fall_back(choice)
    # Nothing deleted: the bad files are there under new names, byte for byte.
    assert sorted(os.path.basename(new) for _, new in renamed) == [
        "model.ckpt-3.data-00000-of-00001.unusable",
        "model.ckpt-3.index.unusable",
    ]
    for name, content in bad_files.items():
        assert (tmp_path / (name + ".unusable")).read_bytes() == content
    assert checkpoints.read_state(str(tmp_path)) == (second, [first, second])
    assert restore(tmp_path) == (2, 2.0)  # v0 = step * 1
    message = choice.fallback_message(renamed)
    # Cut at 100 bytes: global_step (bytes 0-7) reads, v0 (8-263) does not.
    assert message.startswith(
        f"checkpoint {latest} cannot be used: {_data_file(latest)}: tensor 'v0': Read less "
        "bytes than requested. "
    )
    assert f"Restoring the previous good checkpoint {second} instead" in message
    assert "model.ckpt-3.index -> model.ckpt-3.index.unusable" in message


def test_a_fallback_goes_past_every_bad_checkpoint(tmp_path):
    first, second, latest = make_checkpoints(tmp_path)
    os.truncate(_data_file(latest), 100)
    os.remove(second + ".index")
    choice = checkpoints.choose(str(tmp_path), checkpoints.full_problem)
    assert choice.restore == first
    assert [p.checkpoint for p in choice.problems] == [latest, second]
    checkpoints.fall_back(choice)
    assert restore(tmp_path) == (1, 1.0)


def test_when_no_checkpoint_restores_nothing_is_changed(tmp_path):
    prefixes = make_checkpoints(tmp_path, steps=(1, 2))
    for prefix in prefixes:
        os.truncate(_data_file(prefix), 10)
    before = _listing(tmp_path)
    # The launcher's TF-free check lets this directory through (all files are there); the
    # chief finds that nothing restores, and exits 2 before its server starts.
    assert checkpoints.choose(str(tmp_path)).ok
    local.check_checkpoints(str(tmp_path))
    choice = checkpoints.choose(str(tmp_path), checkpoints.full_problem)
    assert choice.restore is None and not choice.ok
    message = choice.failure_message()
    # Newest first; cut at 10 bytes, each in v0 (bytes 8-263).
    assert message == (
        f"--model_dir={str(tmp_path)!r}: no checkpoint there restores: "
        f"{_data_file(prefixes[1])}: tensor 'v0': Read less bytes than requested; "
        f"{_data_file(prefixes[0])}: tensor 'v0': Read less bytes than requested. "
        "Nothing in the directory was changed; move the bad files away to start from "
        "scratch there, or give another --model_dir."
    )
    assert "Nothing in the directory was changed" in message
    with pytest.raises(UsageError, match="no checkpoint there restores"):
        task.check_checkpoints(str(tmp_path), progress.Reporter("worker 0"))
    assert _listing(tmp_path) == before


def test_a_directory_without_checkpoints_starts_from_scratch(tmp_path):
    (tmp_path / "export").mkdir()
    assert checkpoints.choose(str(tmp_path)) == checkpoints.Choice(str(tmp_path), None)


def test_an_unreadable_index_file_falls_back_to_the_newest_good_checkpoint(tmp_path):
    *_, latest = make_checkpoints(tmp_path)
    (tmp_path / "checkpoint").write_text("garbage {\n")
    # What TensorFlow does by itself: it ignores the file and starts from scratch, and its
    # next saves would overwrite the checkpoints of the same global steps.
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    choice = checkpoints.choose(str(tmp_path))
    assert choice.restore == latest and choice.problems == ()
    assert choice.state_problem.reason == (
        "line 1 is not part of a checkpoint index file: 'garbage {'"
    )
    renamed = checkpoints.fall_back(choice)
    assert renamed == [(str(tmp_path / "checkpoint"), str(tmp_path / "checkpoint.unusable"))]
    assert (tmp_path / "checkpoint.unusable").read_text() == "garbage {\n"
    assert restore(tmp_path) == (3, 3.0)
    assert choice.fallback_message(renamed).startswith(
        f"the index file {tmp_path / 'checkpoint'} cannot be used: "
    )


def test_an_index_file_naming_a_missing_checkpoint_falls_back(tmp_path):
    *_, latest = make_checkpoints(tmp_path)
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-9"\n')
    choice = checkpoints.choose(str(tmp_path))
    assert choice.restore == latest
    assert str(choice.problems[0]) == (
        f"{tmp_path}/model.ckpt-9.index: does not exist, nor any other file of the checkpoint"
    )
    checkpoints.fall_back(choice)
    assert restore(tmp_path) == (3, 3.0)


def test_checkpoints_without_an_index_file_are_restored_not_overwritten(tmp_path):
    *_, latest = make_checkpoints(tmp_path)
    os.remove(tmp_path / "checkpoint")
    choice = checkpoints.choose(str(tmp_path))
    assert choice.restore == latest
    assert choice.state_problem.reason.endswith(
        "no index file names a latest checkpoint, but the directory holds model.ckpt-1, "
        "model.ckpt-2, model.ckpt-3"
    )
    assert checkpoints.fall_back(choice) == []  # Nothing to rename; the index is written.
    assert restore(tmp_path) == (3, 3.0)


def test_a_second_fallback_keeps_the_files_of_the_first(tmp_path):
    *_, latest = make_checkpoints(tmp_path)
    (tmp_path / "model.ckpt-3.index.unusable").write_bytes(b"from an earlier fallback")
    os.truncate(_data_file(latest), 100)
    choice = checkpoints.choose(str(tmp_path), checkpoints.full_problem)
    renamed = dict(checkpoints.fall_back(choice))
    assert renamed[latest + ".index"] == latest + ".index.unusable-2"
    assert (tmp_path / "model.ckpt-3.index.unusable").read_bytes() == b"from an earlier fallback"


def test_read_state_reads_the_index_file_tensorflow_writes(tmp_path):
    tf.compat.v1.train.update_checkpoint_state(
        str(tmp_path),
        "model.ckpt-7",
        all_model_checkpoint_paths=["/elsewhere/model.ckpt-2", "model.ckpt-7"],
        all_model_checkpoint_timestamps=[1.5, 2.5],
        last_preserved_timestamp=1.0,
    )
    assert checkpoints.read_state(str(tmp_path)) == (
        f"{tmp_path}/model.ckpt-7",
        ["/elsewhere/model.ckpt-2", f"{tmp_path}/model.ckpt-7"],
    )
    # And the other way round: what fall_back writes, TensorFlow reads.
    checkpoints.write_state(str(tmp_path), f"{tmp_path}/model.ckpt-9", [f'{tmp_path}/a b"c'])
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == f"{tmp_path}/model.ckpt-9"
    assert list(state.all_model_checkpoint_paths) == [
        f'{tmp_path}/a b"c',
        state.model_checkpoint_path,
    ]


def test_the_chief_falls_back_and_warns_before_its_server_starts(tmp_path):
    _, second, latest = make_checkpoints(tmp_path)
    os.truncate(_data_file(latest), 100)
    output = io.StringIO()
    task.check_checkpoints(str(tmp_path), progress.Reporter("worker 0", stream=output))
    # The whole warning, one line: cut at 100 bytes, v0 (bytes 8-263) is the tensor that does
    # not read.
    assert output.getvalue() == (
        f"worker 0: warning: checkpoint {latest} cannot be used: {_data_file(latest)}: tensor "
        f"'v0': Read less bytes than requested. Restoring the previous good checkpoint "
        f"{second} instead; renamed, not deleted: model.ckpt-3.data-00000-of-00001 -> "
        "model.ckpt-3.data-00000-of-00001.unusable, model.ckpt-3.index -> "
        f"model.ckpt-3.index.unusable; {tmp_path}/checkpoint now names model.ckpt-2.\n"
    )
    assert tf.train.latest_checkpoint(str(tmp_path)) == second


def _graph_of(shapes):
    """A graph with a variable of each `{name: shape}` and `global_step`."""
    graph = tf.Graph()
    with graph.as_default():
        for name, shape in shapes.items():
            tf.compat.v1.get_variable(name, shape, tf.float32)
        tf.compat.v1.train.get_or_create_global_step()
    return graph


def test_a_checkpoint_of_this_model_fits(tmp_path, world):
    del world  # Ref variables and resource variables are saved under the same names.
    make_checkpoints(tmp_path, steps=(1,))
    checkpoint_fit.check(str(tmp_path), _graph_of({"v0": [VALUES], "v1": [VALUES]}))


def test_a_checkpoint_of_another_model_is_named_with_what_differs(tmp_path, world):
    del world
    make_checkpoints(tmp_path, steps=(1,))  # v0, v1, v2 of [64], global_step.
    graph = _graph_of({"v0": [VALUES], "v1": [32], "w": [8], "x": [1]})
    with pytest.raises(UsageError) as raised:
        checkpoint_fit.check(str(tmp_path), graph)
    # v2 is only in the checkpoint: it does not matter. w and x are not in it; v1 is [64] there.
    assert str(raised.value) == (
        f"the checkpoint {tmp_path}/model.ckpt-1 in --model_dir was written by another job: "
        "2 variable(s) of this job are not in it (w, x); 1 have another shape (v1 [64] there, "
        "[32] here). Run with the flags it was written with (--model, --dataset, --workers), "
        "or give a new --model_dir."
    )


def test_a_long_mismatch_shows_the_first_few_names(tmp_path):
    make_checkpoints(tmp_path, steps=(1,))
    graph = _graph_of({f"w{i}": [1] for i in range(checkpoint_fit.SHOWN + 2)})
    problem = checkpoint_fit.mismatch(tf.train.latest_checkpoint(str(tmp_path)), graph)
    assert problem == "6 variable(s) of this job are not in it (w0, w1, w2, w3 and 2 more)"


def test_no_checkpoint_nothing_to_fit(tmp_path):
    checkpoint_fit.check(str(tmp_path), _graph_of({"w": [1]}))


def test_a_model_dir_under_a_regular_file_is_rejected(tmp_path):
    (tmp_path / "file").write_text("")
    path = str(tmp_path / "file" / "run1")
    with pytest.raises(UsageError) as caught:
        preflight.prepare_model_dir(path)
    assert str(caught.value) == (
        f"--model_dir={path!r}: cannot create the directory: {tmp_path}/file is a file, not a "
        "directory."
    )


@pytest.mark.root
def test_a_read_only_model_dir_is_rejected(mount_tmpfs):
    point = mount_tmpfs("1m", read_only=True)
    with pytest.raises(UsageError, match=r"cannot write there: Read-only file system\."):
        preflight.prepare_model_dir(str(point))
    with pytest.raises(UsageError, match=r"cannot create the directory: Read-only file system"):
        preflight.prepare_model_dir(str(point / "run1"))


@pytest.mark.root
def test_a_model_dir_on_a_full_disk_is_rejected(mount_tmpfs):
    point = mount_tmpfs("256k")
    os.mkdir(point / "run1")  # Made before the disk is full: an empty directory is there.
    fill(point)
    with pytest.raises(UsageError, match=r"run1': cannot write there: No space left on device"):
        preflight.prepare_model_dir(str(point / "run1"))
    assert os.listdir(point / "run1") == []  # The probe file is gone.


def test_a_writable_model_dir_passes_and_keeps_no_probe(tmp_path):
    preflight.prepare_model_dir(str(tmp_path / "new" / "run1"))
    assert os.listdir(tmp_path / "new" / "run1") == []


def test_no_temporary_model_dir_names_the_temporary_directory(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "file"))
    with pytest.raises(UsageError, match=r"no temporary directory can be made in '.*/file'"):
        preflight.make_temporary_model_dir()


def test_a_port_in_use_names_the_port_the_task_and_the_flag():
    with held_port() as port:
        ps = cluster.from_flags("ps", 0, f"localhost:{port}", "localhost:1")
        with pytest.raises(UsageError) as caught:
            preflight.check_port(ps)
    assert str(caught.value) == (
        f"ps 0 ('localhost:{port}' in --ps_hosts): port {port} is already in use on this "
        f"machine (`ss -ltnp 'sport = :{port}'` shows by what); stop that process or give "
        "ps 0 another port."
    )


def test_a_port_in_use_names_the_tf_config_key(monkeypatch):
    with held_port() as port:
        text = json.dumps(
            {
                "cluster": {"chief": [f"localhost:{port}"], "ps": ["localhost:1"]},
                "task": {"type": "chief", "index": 0},
            }
        )
        monkeypatch.setenv("TF_CONFIG", text)
        with pytest.raises(UsageError, match=r"^worker 0 \('localhost:\d+', TF_CONFIG "):
            preflight.check_port(cluster.from_tf_config(text))
        with pytest.raises(UsageError, match=r"TF_CONFIG cluster.chief\[0\]\): port \d+ is"):
            preflight.check_port(cluster.from_tf_config(text))


def test_a_free_port_passes_also_with_connections_in_time_wait():
    # A task restarted on its port finds the last connections of its predecessor in
    # TIME_WAIT; gRPC listens there all the same (SO_REUSEADDR), so the check must too.
    with held_port() as port:
        pass
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        accepted, _ = server.accept()
        accepted.close()  # The side that closes first keeps the connection in TIME_WAIT.
        client.close()
    preflight.check_port(cluster.from_flags("worker", 0, "localhost:1", f"localhost:{port}"))


@pytest.mark.parametrize(
    ("task_json", "message"),
    [
        ({"type": "worker", "index": 3},
         r"TF_CONFIG task.index=3: cluster.worker has 2 task\(s\), so the index must be in "
         r"\[0, 2\)"),
        ({"type": "chief", "index": 0},
         "TF_CONFIG task.type='chief': the cluster has no 'chief' task"),
    ],
)  # fmt: skip
def test_the_estimator_session_config_rejects_a_task_outside_its_cluster(task_json, message):
    text = json.dumps({"cluster": {"worker": ["h:1", "h:2"], "ps": ["h:3"]}, "task": task_json})
    with pytest.raises(ValueError, match=message):
        tf_config.session_config(text)


@pytest.mark.root
def test_a_full_disk_during_a_save_keeps_the_previous_checkpoint(mount_tmpfs):
    model_dir = mount_tmpfs("512k") / "run1"
    model_dir.mkdir()
    with tf.Graph().as_default():
        variables, step, saver = _build()
        g = types.SimpleNamespace(saver=saver, global_step=step)
        with tf.compat.v1.train.MonitoredSession() as sess:
            step.load(4, export.raw_session(sess))
            first = export.save_checkpoint(sess, g, str(model_dir))
            fill(model_dir.parent)
            step.load(5, export.raw_session(sess))
            with pytest.raises(files.SaveError) as caught:
                export.save_checkpoint(sess, g, str(model_dir))
    assert str(caught.value) == (
        f"could not write a checkpoint to {model_dir}: No space left on device "
        f"(ResourceExhaustedError); the latest checkpoint is still {first}."
    )
    assert first == f"{model_dir}/model.ckpt-4"
    os.remove(model_dir.parent / "filler")  # Room for the restore's session, if it needs any.
    assert tf.train.latest_checkpoint(str(model_dir)) == first
    assert checkpoints.full_problem(first) is None
    assert restore(model_dir)[0] == 4
    # No `model.ckpt-5_temp` directory is left behind.
    assert sorted(os.listdir(model_dir)) == [
        "checkpoint",
        "model.ckpt-4.data-00000-of-00001",
        "model.ckpt-4.index",
    ]
