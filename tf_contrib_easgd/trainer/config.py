"""The settings of an easgd-train job: `TrainConfig`, and the checks that make it from flags.

`plan_from_flags` turns the parsed flags (and TF_CONFIG, or a Slurm job step) into a `Plan`:
the shared `TrainConfig` and, in task mode, the one task to run. It needs no TensorFlow, so
that every flag is checked before any process starts. The flags are defined in `cli`.
"""

import dataclasses
import math
import os

from absl import flags

from tf_contrib_easgd.trainer import cluster, data

#: The `--model` choices, the models of `models` (here, where no TensorFlow is imported).
MODELS = ("mlp", "cnn")

#: The `--optimizer` choices and the learning rate each gets without `--learning_rate`.
DEFAULT_LEARNING_RATES = {
    "sgd": 0.1,
    "momentum": 0.05,
    "nesterov": 0.05,
    "adam": 0.002,
    "adagrad": 0.1,
    "rmsprop": 0.002,
}
#: The optimizers `graph.make_optimizer` builds.
OPTIMIZERS = tuple(DEFAULT_LEARNING_RATES)

#: The `--cluster` modes.
LOCAL = "local"
TASK = "task"

#: The `--wire_dtype` choices (`wire_dtype` of the library: float32 is its default).
WIRE_DTYPES = ("float32", "bfloat16", "float16")
#: easgd-train's moving rate is the paper's beta / number of workers (contrib's, the
#: library's default, is beta / communication_period / number of workers).
PAPER_BETA = 0.9
#: `--overlap` and `--wire_dtype` when not given: what trained fastest where the tasks talk,
#: on loopback (local mode) or across a network (task mode); measured in BENCHMARKS.md.
AUTOMATIC_EXCHANGE = {LOCAL: (False, "float32"), TASK: (True, "bfloat16")}
#: Overlap is on by default only up to this moving rate: a move that lands a period late
#: and takes back most of the worker's lead also takes back most of what it learnt since
#: (one worker at 0.9: test accuracy 0.72 after 200 steps, 0.96 without overlap).
OVERLAP_MAX_MOVING_RATE = 0.5
#: The `--api` choices: TF1 graph with `ElasticAverageOptimizer`, or Keras `model.fit` with
#: `ElasticAverageCallback`.
TF1 = "tf1"
KERAS = "keras"
APIS = (TF1, KERAS)
#: The flags of `--api=tf1` only, and the value each must keep with `--api=keras`.
_TF1_ONLY_FLAGS = {"rho": 0.0, "synchronous": False}

#: easgd-train's exit codes: done, a task failed, bad flags (a `UsageError`), interrupted.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: The flags that describe one task of a multi-machine job.
TASK_FLAGS = ("job_name", "task_index", "ps_hosts", "worker_hosts")

#: The flags of local mode only (a task of a Slurm job step uses `--ps` and `--workers`).
_LOCAL_FLAGS = ("ps", "workers", "max_restarts")

#: Set in each task of a Slurm job step (`srun`): its number of tasks, this task's rank.
_STEP_TASKS = "SLURM_STEP_NUM_TASKS"
_SLURM_PROCID = "SLURM_PROCID"


class UsageError(ValueError):
    """A flag, TF_CONFIG or the dataset is unusable; the message names which and why."""


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The validated training settings every task of a job shares (see the flags)."""

    steps: int
    batch_size: int
    optimizer: str
    learning_rate: float
    communication_period: int
    moving_rate: float | None
    rho: float
    synchronous: bool
    overlap: bool
    model: str
    dataset: str
    model_dir: str
    save_checkpoint_steps: int
    seed: int
    log_every_steps: int
    eval_every_steps: int
    timeout_secs: float
    stall_report_secs: float = 30.0
    wire_dtype: str = "float32"
    reuse_freed_memory: bool = True
    api: str = TF1

    def to_flags(self):
        """Returns the command-line flags that give a task this configuration."""
        values = dataclasses.asdict(self)
        return [
            f"--{name}={str(value).lower() if isinstance(value, bool) else value}"
            for name, value in values.items()
            if value is not None
        ]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What this invocation runs: a local cluster, or one task (`task` set)."""

    config: TrainConfig
    task: cluster.TaskConfig | None = None
    num_ps: int = 1
    num_workers: int = 2
    max_restarts: int = 0


def plan_from_flags(flag_values=flags.FLAGS, environ=None):
    """Validates the parsed flags (and TF_CONFIG or a Slurm step) and returns what to run.

    Args:
        flag_values: the parsed `absl.flags.FlagValues`.
        environ: the environment to read TF_CONFIG or the Slurm step from (default
            `os.environ`).

    Returns:
        A `Plan`.

    Raises:
        UsageError: naming the flag (or TF_CONFIG, or the dataset path) and its value.
    """
    f = flag_values
    task = _task_of(f, os.environ if environ is None else environ)
    num_workers = task.num_workers if task else f.workers
    config = _train_config(f, task, num_workers)
    return Plan(
        config=config,
        task=task,
        num_ps=task.num_ps if task else f.ps,
        num_workers=num_workers,
        max_restarts=f.max_restarts,
    )


def _task_of(f, environ):
    """Returns the task of task mode, or None in local mode (chosen as `--cluster` says).

    Without `--cluster`, task mode is chosen when a task flag or TF_CONFIG is set, or in a
    task of a Slurm job step of 2 tasks or more (`srun -n 3 easgd-train`); else local mode.
    A task is described by the task flags, else by TF_CONFIG, else by the Slurm job step.
    """
    task_flags_given = [name for name in TASK_FLAGS if f[name].value is not None]
    tf_config = environ.get(cluster.TF_CONFIG, "").strip()
    implied = TASK if task_flags_given or tf_config or _in_slurm_step(environ) else LOCAL
    mode = f.cluster if f["cluster"].present else implied
    from_slurm = mode == TASK and not (task_flags_given or tf_config) and _STEP_TASKS in environ
    try:
        _check_flags_of_other_modes(f, mode, from_slurm)
        if mode == LOCAL:
            if task_flags_given:
                name = task_flags_given[0]
                raise UsageError(
                    f"--{name}={f[name].value!r} describes one task of a multi-machine job; "
                    "it cannot be combined with --cluster=local."
                )
            return None
        if from_slurm:
            return _slurm_task(f, environ)
        return _task_from(f, task_flags_given, tf_config, environ)
    except cluster.ClusterConfigError as error:
        raise UsageError(str(error)) from None


def _in_slurm_step(environ):
    """Whether this process is a task of a Slurm job step of 2 tasks or more."""
    tasks = environ.get(_STEP_TASKS, "").strip()
    return tasks.isdigit() and int(tasks) >= 2 and _SLURM_PROCID in environ


def _check_flags_of_other_modes(f, mode, from_slurm):
    """Raises UsageError for a flag that `mode` (and the task's source) does not use."""
    if mode == TASK and not from_slurm:
        for name in _LOCAL_FLAGS:
            if f[name].present:
                raise UsageError(
                    f"--{name}={f[name].value} applies to --cluster=local only; in task "
                    "mode the cluster comes from --ps_hosts/--worker_hosts or TF_CONFIG, "
                    "and whoever starts the tasks restarts them."
                )
    if from_slurm and f["max_restarts"].present:
        raise UsageError(
            f"--max_restarts={f.max_restarts} applies to --cluster=local only; the tasks of "
            "a Slurm job step are restarted by whoever starts them (srun, sbatch --requeue)."
        )
    if not from_slurm and f["slurm_port_base"].present:
        raise UsageError(
            f"--slurm_port_base={f.slurm_port_base} applies to the tasks of a Slurm job step "
            "only (srun easgd-train ...); this process is none."
        )


def _slurm_task(f, environ):
    """Returns the TaskConfig of this task of a Slurm job step: `--ps` of them are ps."""
    task = cluster.from_slurm(f.ps, environ, f.slurm_port_base)
    if f["workers"].present and f.workers != task.num_workers:
        raise UsageError(
            f"--workers={f.workers}: the Slurm job step has {task.num_ps + task.num_workers} "
            f"tasks, {task.num_ps} of them ps (--ps={f.ps}), so it has {task.num_workers} "
            "worker(s); leave --workers out or make the two agree."
        )
    return task


def _task_from(f, task_flags_given, tf_config, environ):
    """Returns the TaskConfig of task mode from the flags or else from TF_CONFIG."""
    if f.job_name is not None:
        for name in ("ps_hosts", "worker_hosts"):
            if f[name].value is None:
                raise UsageError(f"--job_name={f.job_name} needs --{name} as well.")
        return cluster.from_flags(
            f.job_name,
            0 if f.task_index is None else f.task_index,
            f.ps_hosts,
            f.worker_hosts,
        )
    if task_flags_given:
        name = task_flags_given[0]
        raise UsageError(
            f"--{name}={f[name].value!r} is given without --job_name; task mode needs "
            "--job_name, --task_index, --ps_hosts and --worker_hosts (or TF_CONFIG alone)."
        )
    if not tf_config:
        in_a_job = (
            f" This process is in Slurm job {environ['SLURM_JOB_ID']} but in no job step: "
            "start the tasks with srun (in an sbatch script: srun easgd-train ...)."
            if environ.get("SLURM_JOB_ID")
            else " (Or run it as the tasks of a Slurm job step: srun easgd-train ...)"
        )
        raise UsageError(
            "--cluster=task needs --job_name, --task_index, --ps_hosts and --worker_hosts, "
            "or the TF_CONFIG environment variable; neither is set." + in_a_job
        )
    return cluster.from_tf_config(tf_config)


def _train_config(f, task, num_workers):
    """Checks the training flags and returns the `TrainConfig` they give, with easgd-train's
    defaults where a flag is not given (`describe_exchange` says which)."""
    learning_rate = _learning_rate(f)
    moving_rate = PAPER_BETA / num_workers if f.moving_rate is None else f.moving_rate
    overlap, wire_dtype = AUTOMATIC_EXCHANGE[LOCAL if task is None else TASK]
    overlap = overlap and moving_rate <= OVERLAP_MAX_MOVING_RATE
    if f.api == KERAS:
        # The callback's 16-bit wire halves its bytes but did not train faster where it
        # was measured (BENCHMARKS.md, "Against TF 2's strategies"): float32 unless told.
        wire_dtype = "float32"
    if f.moving_rate is not None and not 0 < f.moving_rate <= 1:
        raise UsageError(f"--moving_rate={f.moving_rate!r}: must be in (0, 1].")
    if not f.rho >= 0:
        raise UsageError(f"--rho={f.rho!r}: must be >= 0.")
    if not math.isfinite(f.timeout_secs):
        raise UsageError(f"--timeout_secs={f.timeout_secs!r}: must be a finite number.")
    if not (math.isfinite(f.stall_report_secs) and f.stall_report_secs > 0):
        raise UsageError(f"--stall_report_secs={f.stall_report_secs!r}: must be a number > 0.")
    _check_api(f)
    _check_dataset(f.dataset, task)
    if f.model_dir and os.path.exists(f.model_dir) and not os.path.isdir(f.model_dir):
        raise UsageError(f"--model_dir={f.model_dir!r} exists and is not a directory.")
    return TrainConfig(
        steps=f.steps,
        batch_size=f.batch_size,
        optimizer=f.optimizer,
        learning_rate=learning_rate,
        communication_period=f.communication_period,
        moving_rate=moving_rate,
        rho=f.rho,
        synchronous=f.synchronous,
        overlap=overlap if f.overlap is None else f.overlap,
        model=f.model,
        dataset=f.dataset if f.dataset == data.DIGITS else os.path.abspath(f.dataset),
        model_dir=os.path.abspath(f.model_dir) if f.model_dir else "",
        save_checkpoint_steps=f.save_checkpoint_steps,
        seed=f.seed,
        log_every_steps=f.log_every_steps,
        eval_every_steps=f.eval_every_steps,
        timeout_secs=f.timeout_secs,
        stall_report_secs=f.stall_report_secs,
        wire_dtype=wire_dtype if f.wire_dtype is None else f.wire_dtype,
        reuse_freed_memory=f.reuse_freed_memory,
        api=f.api,
    )


def describe_exchange(config, num_workers, flag_values=flags.FLAGS):
    """The line easgd-train prints first about EASGD's settings: each value, and for those
    no flag gave, that it is easgd-train's default, with the library's (contrib's)."""
    f = flag_values
    contrib_rate = PAPER_BETA / config.communication_period / num_workers
    parts = [
        f"communication_period {config.communication_period}",
        f"moving_rate {config.moving_rate:.4g}"
        + ("" if f["moving_rate"].present else f" (0.9 / {num_workers} workers)"),
        f"rho {config.rho:g}",
        f"overlap {'on' if config.overlap else 'off'}",
        f"wire {config.wire_dtype}",
    ]
    ours = ("moving_rate", "rho", "overlap") + (() if config.api == KERAS else ("wire_dtype",))
    defaults = [name for name in ours if not f[name].present]
    text = "easgd-train: EASGD " + ", ".join(parts)
    if defaults:
        text += (
            f"; {', '.join(defaults)} are easgd-train's defaults (measured fastest here: "
            "docs/TUNING.md), not the library's, which are contrib's: moving_rate "
            f"{contrib_rate:.4g}, rho = moving_rate / learning_rate, overlap off, float32"
        )
    return text


def _check_api(f):
    """Raises UsageError for a flag of `--api=tf1` given a value with `--api=keras`."""
    if f.api != KERAS:
        return
    for name, neutral in _TF1_ONLY_FLAGS.items():
        if f[name].value != neutral:
            raise UsageError(
                f"--{name}={f[name].value} applies to --api=tf1 only: ElasticAverageCallback "
                "has no elastic penalty and no start-up barrier."
            )


def _learning_rate(f):
    """`--learning_rate`, or the default of `--optimizer` when it is not given."""
    if f.learning_rate is None:
        return DEFAULT_LEARNING_RATES[f.optimizer]
    if not f.learning_rate > 0:
        raise UsageError(f"--learning_rate={f.learning_rate!r}: must be > 0.")
    return f.learning_rate


def _check_dataset(dataset, task):
    """Loads an `.npz` dataset once to check it; a parameter server never reads it."""
    if dataset == data.DIGITS or (task and task.is_ps):
        return
    try:
        data.load_npz(dataset)
    except data.DatasetError as error:
        raise UsageError(f"--dataset={dataset!r}: {error}") from None
