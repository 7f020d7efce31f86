"""easgd-train's local mode: a whole job as child processes of this one, on loopback ports.

`main` takes easgd-train's command line into a private network namespace (`isolation`) and
checks `--model_dir`; `run_local` starts each task as `python -m tf_contrib_easgd.trainer
--cluster=task ...` under a `launcher.LocalCluster`, shows their progress events, and
completes the chief's `summary.json` with the wall time. The children inherit this
process's network namespace. No TensorFlow here. See
docs/DESIGN.md, "The trainer's task lifecycle".
"""

import json
import os
import re
import sys
import time

import portpicker

from tf_contrib_easgd.runner import isolation, launcher
from tf_contrib_easgd.runner.display import Display, parse_event
from tf_contrib_easgd.trainer import checkpoints, cluster, files, preflight, progress
from tf_contrib_easgd.trainer.config import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    describe_exchange,
)

#: How long the launcher lets the parameter servers exit by themselves after the job.
_SERVER_EXIT_SECS = 10.0
# The start of TensorFlow's C++ log lines of the given levels, as TF 2.21 prints them before
# absl's logging starts ("I0000 00:00:1796357057.470427    2733 port.cc:153] ...") and as
# TF 2.15 does ("2026-12-04 04:04:41.968241: I tensorflow/core/util/port.cc:113] ...").
_LOG_PREFIX = (
    r"(?:[{levels}]\d{{4}} \S+ +\d+ "
    r"|\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [{levels}] )\S+:\d+\] "
)
# INFO lines, absl's banner, the second line of the CPU-instructions notice.
_START_UP_LINE = re.compile(
    _LOG_PREFIX.format(levels="I")
    + r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    + r"|To enable the following instructions: "
)
_WARNING_OR_ERROR_LINE = re.compile(_LOG_PREFIX.format(levels="WE"))
# What TensorFlow's GPU probes print as warnings or errors on a machine without a GPU.
_GPU_PROBES = (
    "Could not find TensorRT",
    "failed call to cuInit",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
)


def main(plan, started_at, command_line, expose_ports):
    """easgd-train's local mode, after its flags: returns the exit code.

    Before anything is made, runs `command_line` again in a private network namespace
    (`isolation.isolate_local_job`, unless `expose_ports`); there makes and checks
    `--model_dir` (`preflight.check_before_start`, `check_checkpoints`), then `run_local`.
    """
    command = [sys.executable, "-m", "tf_contrib_easgd.trainer", *command_line[1:]]
    try:
        network = isolation.isolate_local_job(command, expose_ports)
    except OSError as error:
        print(
            f"easgd-train: error: cannot bring up the loopback of the private network "
            f"namespace ({error}); --expose_ports runs the job without one.",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        plan = preflight.check_before_start(plan)
        check_checkpoints(plan.config.model_dir)
    except UsageError as error:
        print(f"easgd-train: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    settings = describe_exchange(plan.config, plan.num_workers)
    return run_local(plan, started_at, network=network, settings=settings)


def run_local(plan, started_at, stream=None, network=None, settings=None):
    """Runs a whole job as child processes on this machine; returns the exit code.

    Args:
        plan: the `config.Plan` (with `task` None).
        started_at: `time.monotonic()` when the program started.
        stream: where progress and messages go (default `sys.stderr`).
        network: the `isolation.Isolation` of this process (its message is shown once, at
            the start), or None.
        settings: a line saying EASGD's settings (`config.describe_exchange`), shown
            second, or None.
    """
    stream = stream or sys.stderr
    config = plan.config
    tasks = _task_specs(plan)
    display = Display(plan.num_workers, config.steps, stream, bar=stream.isatty())
    display.message(
        f"easgd-train: {plan.num_ps} ps + {plan.num_workers} workers on localhost, "
        f"{config.steps} local steps each; model_dir {config.model_dir}"
    )
    if settings is not None:
        display.message(settings)
    if network is not None:
        display.message(network.message)
    code = _supervise(plan, tasks, display, stream)
    if code:
        return code
    return _complete_summary(config.model_dir, started_at, stream)


def check_checkpoints(model_dir):
    """Before any task starts: fails if checkpoints are in `model_dir` but none restores.

    Only that each checkpoint's files are there is checked here (`checkpoints.index_problem`,
    no TensorFlow). The chief reads them before its server starts (`task.check_checkpoints`):
    it falls back to an earlier good checkpoint and warns, or exits 2 when none restores.

    Raises:
        UsageError: naming each bad file.
    """
    choice = checkpoints.choose(model_dir)
    if choice.restore is None and not choice.ok:
        raise UsageError(choice.failure_message())


def _task_specs(plan):
    """The `launcher.TaskSpec` of every task of `plan`, each on a free loopback port."""
    ports = [portpicker.pick_unused_port() for _ in range(plan.num_ps + plan.num_workers)]
    hosts = [f"localhost:{port}" for port in ports]
    ps_hosts, worker_hosts = tuple(hosts[: plan.num_ps]), tuple(hosts[plan.num_ps :])
    command = [sys.executable, "-m", "tf_contrib_easgd.trainer", "--cluster=task"]
    command += ["--progress_format=json", *plan.config.to_flags()]
    return [
        launcher.TaskSpec(
            job,
            index,
            tuple(command + cluster.TaskConfig(ps_hosts, worker_hosts, job, index).to_flags()),
            finishes=job == cluster.WORKER,
        )
        for job, count in ((cluster.PS, plan.num_ps), (cluster.WORKER, plan.num_workers))
        for index in range(count)
    ]


def is_tensorflow_start_up_line(line):
    """Whether `line` is one TensorFlow prints as it loads on a machine without a GPU.

    Its C++ INFO lines (TF 2.21's and 2.15's formats) and the WARNING and ERROR lines of
    its GPU probes, which a failed task's error message leaves out; other warnings and
    errors stay.
    """
    return bool(_START_UP_LINE.match(line)) or (
        bool(_WARNING_OR_ERROR_LINE.match(line)) and any(probe in line for probe in _GPU_PROBES)
    )


def _task_environment():
    """The children's environment: unbuffered output, no TF_CONFIG, fewer TF log lines."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop(cluster.TF_CONFIG, None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _supervise(plan, tasks, display, stream):
    """Runs `tasks` until the workers are done; returns 0 or the exit code of a failure.

    A task that fails with `EXIT_USAGE` (bad input it found on this machine, e.g. the chief
    finding no checkpoint in `--model_dir` that restores) makes the job's code `EXIT_USAGE`
    too; any other failure, `EXIT_FAILED`. Every task still running is stopped on the way
    out. The display is closed.
    """
    config = plan.config

    def on_start(task, pid, restarts):
        again = f" (restart {restarts})" if restarts else ""
        display.message(f"easgd-train: started {task.name}, pid {pid}{again}")

    def on_line(task, line):
        del task  # Every event names its task.
        event = parse_event(line)
        if event is not None:
            display.event(event)

    log_dir = os.path.join(config.model_dir, files.LOGS_DIR)
    try:
        with (
            launcher.sigterm_as_keyboard_interrupt(),
            launcher.LocalCluster(
                tasks,
                env=_task_environment(),
                log_dir=log_dir,
                on_line=on_line,
                on_start=on_start,
                max_restarts=plan.max_restarts,
                # Bad input found by a task (a chief with no checkpoint that restores) is
                # found again by its restart.
                final_codes=(EXIT_USAGE,),
                hide_from_tail=is_tensorflow_start_up_line,
                stall_timeout_secs=config.timeout_secs,
            ) as local_cluster,
        ):
            local_cluster.start()
            local_cluster.supervise()
            local_cluster.wait_for_servers(_SERVER_EXIT_SECS)
    except launcher.TaskFailedError as error:
        display.close()
        lines = "\n".join(f"  | {line}" for line in error.tail)
        print(
            f"easgd-train: error: {error}; every other task was stopped. Its last lines:\n"
            f"{lines}\nWhole output: {error.log_path}",
            file=stream,
        )
        return EXIT_USAGE if error.returncode == EXIT_USAGE else EXIT_FAILED
    except launcher.StallError as error:
        display.close()
        print(f"easgd-train: error: {error}; every task was stopped. Logs: {log_dir}", file=stream)
        return EXIT_FAILED
    except KeyboardInterrupt as error:
        display.close()
        reason = str(error) or "Ctrl-C"
        print(f"easgd-train: interrupted ({reason}); every task was stopped.", file=stream)
        return EXIT_INTERRUPTED
    display.close()
    return 0


def _complete_summary(model_dir, started_at, stream):
    """Adds `wall_secs` to the chief's summary.json and prints its line; returns the exit code."""
    try:
        with open(files.summary_path(model_dir), encoding="utf-8") as file:
            summary = json.load(file)
    except (OSError, ValueError) as error:
        print(f"easgd-train: error: the chief wrote no summary ({error}).", file=stream)
        return EXIT_FAILED
    summary["wall_secs"] = time.monotonic() - started_at
    files.write_summary(model_dir, summary)
    print(progress.summary_line(summary), file=stream, flush=True)
    return 0
