"""End-to-end tests (ps and worker OS processes): easgd-train
(tf_contrib_easgd.trainer.cli).

The tests of its other tiers are in tests/unit/test_train.py.
"""

import json
import os
import re
import signal
import subprocess
import sys

import portpicker
import pytest
from processes import child_env as _env
from processes import easgd_train_script as _console_script
from processes import wait_for_exit
from trainer_configs import tf_config as _tf_config

from tf_contrib_easgd.runner import launcher
from tf_contrib_easgd.runner.display import parse_event
from tf_contrib_easgd.trainer import progress

# A process imports TensorFlow in ~10-15 s on the 2-core CI machine, three at once in
# ~30 s; training a few hundred steps adds seconds. No test here comes near these bounds
# unless something hangs.
PROCESS_TIMEOUT_SECS = 240


def _pids(text):
    """The pids of the tasks the launcher reports as started."""
    return [int(pid) for pid in re.findall(r"easgd-train: started \w+ \d+, pid (\d+)", text)]


def test_local_mode_end_to_end(tmp_path):
    # A TF_CONFIG in the launcher's environment must not reach the tasks (local mode).
    result = subprocess.run(
        [
            _console_script(), "--cluster=local", "--steps=150", "--log_every_steps=50",
            "--eval_every_steps=0", "--communication_period=10", f"--model_dir={tmp_path}",
            "--timeout_secs=120",
        ],
        capture_output=True, text=True, env=_env(TF_CONFIG=_tf_config("chief", 0)),
        timeout=PROCESS_TIMEOUT_SECS, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    err = result.stderr
    pids = _pids(err)
    assert len(pids) == 3  # ps 0, worker 0, worker 1
    assert wait_for_exit(pids, 0) == []
    for worker in ("worker 0", "worker 1"):
        assert f"{worker}: step 150/150  loss " in err
    assert "ps 0: stopped" in err  # The chief stopped the ps; the launcher did not need to.

    with open(tmp_path / "summary.json", encoding="utf-8") as file:
        summary = json.load(file)
    # 150 local steps each with tau = 10: 15 exchanges per worker, 30 in all.
    assert summary["local_steps"] == {"0": 150, "1": 150} and summary["exchanges"] == 30
    # ~3.3 epochs of the digits per worker: the MLP's centre is past 0.85 (seeds 0-2: 0.95-0.96).
    assert summary["test_accuracy"] > 0.85
    assert summary["wall_secs"] > summary["chief_secs"] > 0
    assert err.rstrip().splitlines()[-1] == progress.summary_line(summary)
    for name in ("export/centre.index", "worker_0", "worker_1", "logs/worker_1.log"):
        assert (tmp_path / name).exists(), name


def _tf_config_tasks(tmp_path, steps):
    """The tasks of a chief + ps job described by TF_CONFIG, as launcher tasks.

    (Two processes keep the test short; how TF_CONFIG's workers map to worker 1, 2, ...
    is tested above without processes.)
    """
    hosts = {job: [f"localhost:{portpicker.pick_unused_port()}"] for job in ("chief", "ps")}
    command = (
        sys.executable, "-m", "tf_contrib_easgd.trainer", f"--steps={steps}",
        "--log_every_steps=50", f"--model_dir={tmp_path}", "--progress_format=json",
        "--timeout_secs=120",
    )  # fmt: skip
    return [
        launcher.TaskSpec(
            "ps" if task_type == "ps" else "worker",
            0,
            command,
            finishes=task_type != "ps",
            env=(("TF_CONFIG", json.dumps({"cluster": hosts, "task": {"type": task_type}})),),
        )
        for task_type in ("ps", "chief")
    ]  # fmt: skip


def test_task_mode_from_tf_config_end_to_end(tmp_path):
    events = []
    tasks = _tf_config_tasks(tmp_path, steps=200)
    with launcher.LocalCluster(
        tasks,
        env=_env(),
        log_dir=str(tmp_path / "logs"),
        on_line=lambda task, line: events.append(parse_event(line)),
        stall_timeout_secs=PROCESS_TIMEOUT_SECS,
    ) as local:
        local.start()
        local.supervise()
        assert local.wait_for_servers(30)  # The ps exits by itself once the chief is done.
    events = [event for event in events if event]
    by_task = {(e["task"], e["event"]) for e in events}
    # TF_CONFIG's chief ran as worker 0, the chief: it reported the summary.
    assert ("worker 0", "summary") in by_task
    assert ("ps 0", "stopped") in by_task
    summary = next(e for e in events if e["event"] == "summary")
    # One worker, 200 local steps, tau = 10: 20 exchanges.
    assert summary["local_steps"] == {"0": 200} and summary["exchanges"] == 20
    assert summary["num_workers"] == 1
    # ~4.4 epochs of the digits for the one worker; chance is 0.1 (a single EASGD worker
    # is momentum SGD with a lagging centre: 0.96 for seeds 0-2 here).
    assert summary["test_accuracy"] > 0.85


def test_a_failed_worker_stops_every_task_and_fails_the_job(tmp_path):
    # easgd-train itself runs as the one child of a LocalCluster: its output comes line by
    # line with deadlines, and it is killed if the test fails half-way.
    command = (
        _console_script(), "--steps=1000000", "--log_every_steps=1", f"--model_dir={tmp_path}",
        "--timeout_secs=120",
    )  # fmt: skip
    lines = []
    with launcher.LocalCluster(
        [launcher.TaskSpec("easgd-train", 0, command)],
        env=_env(),
        on_line=lambda task, line: lines.append(line),
    ) as job:
        job.start()
        training = job.wait_for_line(
            lambda task, line: line.startswith("worker 1: step "), PROCESS_TIMEOUT_SECS
        )
        assert training, "\n".join(lines)
        pids = _pids("\n".join(lines))
        os.kill(pids[2], signal.SIGKILL)  # worker 1 (started after ps 0 and worker 0)
        with pytest.raises(launcher.TaskFailedError) as caught:
            job.supervise()
    assert caught.value.returncode == 1
    message = "\n".join(lines)
    assert (
        "easgd-train: error: worker 1 was killed by signal SIGKILL; every other task was "
        "stopped" in message
    )
    assert f"Whole output: {tmp_path}/logs/worker_1.log" in message
    assert wait_for_exit(pids) == []
