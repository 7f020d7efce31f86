"""easgd-train: train a classifier with Elastic Averaging SGD on a ps/worker cluster.

Local mode (the default, `--cluster=local`) starts `--ps` parameter servers and
`--workers` workers as separate processes on free loopback ports, shows their progress
and stops them all at the end, on Ctrl-C or when one fails. The tasks run in a private
network namespace where the machine allows one, so that other hosts cannot reach their
ports (TensorFlow's servers have no authentication); --expose_ports opens them. Task
mode runs one task of a multi-machine job, described by `--job_name --task_index
--ps_hosts --worker_hosts` or, when those are absent, by the TF_CONFIG environment
variable (a TF_CONFIG `chief` is worker 0), or else by the Slurm job step this process is
a task of (srun; its first `--ps` tasks are the parameter servers). Every flag is checked
before any process starts; a bad one ends the program with exit code 2 and a message
naming the flag and the value.

    easgd-train                                   # 1 ps + 2 workers on this machine
    easgd-train --workers=4 --optimizer=adam --model=cnn
    easgd-train --api=keras                       # the same, with Keras model.fit
    easgd-train --job_name=worker --task_index=1 \\
        --ps_hosts=ps0:2222 --worker_hosts=w0:2222,w1:2222 --model_dir=/shared/run1
    srun -n 3 easgd-train --ps=1 --model_dir=/shared/run1   # 1 ps + 2 workers on Slurm

Exit codes: 0 done (or the help printed: --help, -h, --helpshort, --helpfull), 1 a task
failed (a failed save too), 2 bad flags or TF_CONFIG or dataset, or a --model_dir, port or
checkpoint unusable here (checked before any server starts), or a checkpoint of another
model (checked before the first step), 130 interrupted.
"""

import sys

from absl import app, flags
from absl import logging as absl_logging

from tf_contrib_easgd import reuse_freed_memory
from tf_contrib_easgd.trainer import (
    cluster,
    data,
    files,
    preflight,
    process,
    progress,
)
from tf_contrib_easgd.trainer.config import (
    APIS,
    AUTOMATIC_EXCHANGE,
    DEFAULT_LEARNING_RATES,
    EXIT_FAILED,
    EXIT_USAGE,
    LOCAL,
    MODELS,
    OPTIMIZERS,
    OVERLAP_MAX_MOVING_RATE,
    TASK,
    TF1,
    WIRE_DTYPES,
    UsageError,
    describe_exchange,
    plan_from_flags,
)

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    "cluster",
    LOCAL,
    [LOCAL, TASK],
    "local: start --ps parameter servers and --workers workers on this machine and "
    "supervise them. task: run one task of a multi-machine job, described by --job_name, "
    "--task_index, --ps_hosts and --worker_hosts, or else by TF_CONFIG, or else by the "
    "Slurm job step (srun) this process is a task of. Without this flag, task mode is "
    "chosen when one of those flags or TF_CONFIG is set, or in a Slurm job step of 2 tasks "
    "or more.",
)
flags.DEFINE_integer(
    "ps",
    1,
    "Local mode: number of parameter servers. A task of a Slurm job step: how many of the "
    "step's tasks are parameter servers (the first ones; the others are workers).",
    lower_bound=1,
)
flags.DEFINE_integer(
    "workers",
    2,
    "Local mode: number of workers. A task of a Slurm job step: optional, must be the "
    "step's number of tasks minus --ps.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "max_restarts",
    0,
    "Local mode: how often a task that crashed (a ps or a worker) is restarted on its port "
    "before the job fails; 0 fails fast. A task that exits with code 2 (bad input it found, "
    "e.g. no checkpoint that restores) is not restarted. A restarted worker rejoins from the "
    "current centre; a restarted ps gets the centre back from the chief's latest checkpoint.",
    lower_bound=0,
)
flags.DEFINE_bool(
    "expose_ports",
    False,
    "Local mode: run the tasks in this machine's network namespace, their gRPC ports open "
    "on every interface (e.g. to attach a profiler from another host). Those servers have no "
    "authentication: whoever reaches a port can run any TensorFlow op in that task. By "
    "default the tasks run in a private network namespace, where the machine allows one.",
)
flags.DEFINE_enum(
    "job_name", None, list(cluster.JOBS), "Task mode: the job of this task (worker 0 is chief)."
)
flags.DEFINE_integer(
    "task_index", None, "Task mode: index of this task in its job (default 0).", lower_bound=0
)
flags.DEFINE_string(
    "ps_hosts", None, "Task mode: comma-separated host:port of every parameter server."
)
flags.DEFINE_string(
    "worker_hosts",
    None,
    "Task mode: comma-separated host:port of every worker; the first is the chief.",
)
flags.DEFINE_integer(
    "slurm_port_base",
    None,
    "A task of a Slurm job step: the port of the first task on each node; the task with "
    "local index i on a node (SLURM_LOCALID) listens on this + i. Default: 20000 + 10 * "
    "(SLURM_JOB_ID % 1000), so that jobs sharing a node rarely collide.",
    lower_bound=1,
    upper_bound=65535,
)
flags.DEFINE_integer("steps", 1000, "Local training steps of each worker.", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Examples per local step.", lower_bound=1)
flags.DEFINE_enum(
    "optimizer",
    "momentum",
    list(OPTIMIZERS),
    "The optimizer of the local steps, wrapped by ElasticAverageOptimizer (momentum and "
    "nesterov use momentum 0.9; nesterov makes EAMSGD).",
)
flags.DEFINE_float(
    "learning_rate",
    None,
    "Learning rate of the optimizer; default per optimizer: "
    + ", ".join(f"{name} {rate:g}" for name, rate in DEFAULT_LEARNING_RATES.items())
    + ".",
)
flags.DEFINE_integer(
    "communication_period",
    10,
    "Local steps between two elastic exchanges with the centre (tau).",
    lower_bound=1,
)
flags.DEFINE_float(
    "moving_rate",
    None,
    "Elastic rate alpha in (0, 1]; default 0.9 / number of workers, the paper's, which "
    "trained fastest (docs/TUNING.md). The library's default, contrib's, is 0.9 / "
    "communication_period / number of workers.",
)
flags.DEFINE_float(
    "rho",
    0.0,
    "Weight of the elastic penalty rho * ||x_i - centre||^2 / 2 in each worker's loss, "
    ">= 0; 0 (the default) switches it off: a pull towards the centre as last read slowed "
    "training in every configuration measured (docs/TUNING.md). The library's default, "
    "contrib's, is moving_rate / learning_rate.",
)
flags.DEFINE_bool("synchronous", False, "Workers wait for each other once, before the first step.")
flags.DEFINE_bool(
    "overlap",
    None,
    "Overlap each exchange with the next communication_period local steps: the worker "
    "trains on while the exchange travels and its elastic move lands one period later "
    "(docs/DESIGN.md). Default: what trained fastest where the tasks talk: "
    f"{'on' if AUTOMATIC_EXCHANGE[LOCAL][0] else 'off'} in local mode (loopback), "
    f"{'on' if AUTOMATIC_EXCHANGE[TASK][0] else 'off'} in task mode (a network) up to a "
    f"moving_rate of {OVERLAP_MAX_MOVING_RATE} (a move that lands a period late takes back "
    "what the worker learnt meanwhile in proportion). The library's default is off.",
)
flags.DEFINE_enum(
    "wire_dtype",
    None,
    list(WIRE_DTYPES),
    "What an exchange sends a parameter server: float32 values, or differences rounded to "
    "16 bits (half the bytes; docs/API.md, 'A 16-bit wire'). Default: what trained fastest "
    f"where the tasks talk: {AUTOMATIC_EXCHANGE[LOCAL][1]} in local mode (loopback), "
    f"{AUTOMATIC_EXCHANGE[TASK][1]} in task mode (a network); with --api=keras float32, "
    "the library's default, until the callback's wire is measured.",
)
flags.DEFINE_bool(
    "reuse_freed_memory",
    True,
    "Each task keeps the large buffers its exchanges free for reuse instead of returning "
    "them to the kernel (tf_contrib_easgd.reuse_freed_memory: a third less CPU per "
    "exchange, measured in BENCHMARKS.md); --noreuse_freed_memory leaves the C allocator "
    "as it is.",
)
flags.DEFINE_enum(
    "api",
    TF1,
    list(APIS),
    "tf1: each worker builds a TF1 graph with ElasticAverageOptimizer and trains in a "
    "MonitoredTrainingSession. keras: each worker trains the same model with Keras "
    "model.fit, eagerly, with ElasticAverageCallback (no --rho or --synchronous; a "
    "restarted worker trains its --steps again, from the centre).",
)
flags.DEFINE_enum("model", "mlp", list(MODELS), "mlp: one hidden layer of 128; cnn: 2 conv.")
flags.DEFINE_string(
    "dataset",
    data.DIGITS,
    "'digits' (scikit-learn's embedded 8x8 digits, fixed split: 1442 train, 355 test) or "
    "the path of an MNIST-style .npz file with x_train, y_train, x_test, y_test.",
)
flags.DEFINE_string(
    "model_dir",
    None,
    "Directory of checkpoints, TensorBoard events (worker_<i>/), the exported centre "
    "(export/), summary.json and, in local mode, the tasks' logs (logs/). Default: a new "
    "temporary directory. Task mode: give every task, the parameter servers too (they "
    "write the checkpoints' data), the same shared directory.",
)
flags.DEFINE_integer(
    "save_checkpoint_steps",
    500,
    "The chief writes a checkpoint (the centre and global_step, which counts elastic "
    "exchanges) to --model_dir every this many of its local steps, and at the end.",
    lower_bound=1,
)
flags.DEFINE_integer("seed", 0, "Seed of initialisation and data shuffling.")
flags.DEFINE_integer(
    "log_every_steps", 100, "Progress report every this many local steps.", lower_bound=1
)
flags.DEFINE_integer(
    "eval_every_steps",
    500,
    "The chief evaluates the centre on the test split every this many local steps and at "
    "the end (TensorBoard: centre/test_accuracy); 0: at the end only.",
    lower_bound=0,
)
flags.DEFINE_float(
    "timeout_secs",
    300.0,
    "Deadline of every wait on another task (parameter servers reachable, the chief's "
    "initialisation, the other workers finishing); local mode also fails when no task "
    "prints anything for this long.",
    lower_bound=1.0,
)
flags.DEFINE_float(
    "stall_report_secs",
    30.0,
    "A worker whose training step has waited this long for the parameter servers says so "
    "(a cut link or a frozen process closes no connection: the step waits until they "
    "answer, then goes on), and says again when it goes on. A step still stuck 5 s after "
    "a cut link is back, or 60 s (at most half of --timeout_secs) on parameter servers "
    "that take connections, restarts the worker in place to rejoin from the centre.",
)
flags.DEFINE_enum(
    "progress_format",
    progress.TEXT,
    list(progress.FORMATS),
    "Task mode: print progress as text, or as JSON lines (used by the local launcher).",
)


def run_task(plan, started_at, progress_format):
    """Runs the one task of `plan` in this process; returns the exit code."""
    if plan.config.reuse_freed_memory:
        reuse_freed_memory()  # Before TensorFlow allocates anything.
    # Imported here: only a task needs TensorFlow, the local launcher does not.
    from tf_contrib_easgd.trainer import error_messages  # noqa: PLC0415
    from tf_contrib_easgd.trainer import task as task_runner  # noqa: PLC0415

    # TensorFlow's rewriting of a failed step's message can hold the GIL for seconds, and
    # the stall watch with it; `error_messages` gives the same message in one pass.
    error_messages.install()
    if not FLAGS["verbosity"].present:
        # TensorFlow's INFO lines ("Graph was finalized.", ...) would bury the progress.
        absl_logging.set_verbosity(absl_logging.WARNING)
    reporter = progress.Reporter(plan.task.name, progress_format)
    try:
        # A worker whose step stays stuck on a partition after the link is back restarts
        # itself, and resumes from the centre (`stall.StallWatch`).
        task_runner.run(
            plan.task, plan.config, reporter, started_at, rejoin=process.restart_this_process
        )
    # A UsageError here: the chief's checkpoints, none restores or they are another job's.
    except (TimeoutError, files.SaveError, UsageError) as error:
        print(f"easgd-train: {plan.task.name}: error: {error}", file=sys.stderr, flush=True)
        return EXIT_USAGE if isinstance(error, UsageError) else EXIT_FAILED
    return 0


def _with_help_as_absl_spells_it(argv):
    """Returns `argv` with each `-h` before any `--` replaced by `--help`, absl's name."""
    argv = list(argv)
    end = argv.index("--") if "--" in argv else len(argv)
    return argv[:1] + ["--help" if arg == "-h" else arg for arg in argv[1:end]] + argv[end:]


def parse_flags(argv):
    """Parses `argv` into `FLAGS` as absl does, but a bad flag exits with code 2, help with 0.

    `--help` (also `-h`, `-?`, `--helpshort`), `--helpfull` and `--helpxml` print the help
    and exit with code 0.

    Returns:
        The arguments that are not flags, the program name first.
    """
    try:
        return FLAGS(_with_help_as_absl_spells_it(argv))
    except flags.Error as error:
        print(f"easgd-train: error: {error}", file=sys.stderr)
        print("Run easgd-train --help to see every flag.", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except SystemExit as done:
        # absl's help flags, the only ones that exit while flags are parsed, print the help
        # and exit with 1, which for easgd-train means "a task failed".
        if done.code == 1:
            sys.exit(0)
        raise


def _main(argv, command_line=None):
    """Runs easgd-train on the parsed flags; returns the exit code.

    Args:
        argv: the arguments that are not flags, the program name first.
        command_line: the whole command line (default `sys.argv`); local mode runs it again
            in a private network namespace (`runner.local.main`).
    """
    started_at = process.started_at()
    if len(argv) > 1:
        print(f"easgd-train: error: unexpected arguments {argv[1:]}", file=sys.stderr)
        return EXIT_USAGE
    try:
        plan = plan_from_flags()
    except UsageError as error:
        print(f"easgd-train: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if plan.task is None:
        # Imported here: the runner builds on the trainer's modules (tests/unit/test_layers.py).
        from tf_contrib_easgd.runner import local  # noqa: PLC0415

        command_line = sys.argv if command_line is None else command_line
        return local.main(plan, started_at, command_line, FLAGS.expose_ports)
    if FLAGS["expose_ports"].present:
        print(
            "easgd-train: error: --expose_ports applies to --cluster=local only; a task of a "
            'multi-machine job listens on every interface (README.md, "Security").',
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        plan = preflight.check_before_start(plan)
    except UsageError as error:
        print(f"easgd-train: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not plan.task.is_ps and FLAGS.progress_format == progress.TEXT:
        # Not in a local job's tasks (JSON lines): the launcher has said it already.
        print(describe_exchange(plan.config, plan.num_workers), file=sys.stderr, flush=True)
    return run_task(plan, started_at, FLAGS.progress_format)


def _show_flags_in_help():
    """Makes `--help` list this module's flags and docstring under any entry point.

    absl's `--help` shows the flags and the docstring of the main module (`sys.argv[0]`),
    which for the `easgd-train` console script is a generated wrapper with neither.
    """
    for flag in FLAGS.get_key_flags_for_module(sys.modules[__name__]):
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    main_module = sys.modules.get("__main__")
    if main_module is not None and not main_module.__doc__:
        main_module.__doc__ = __doc__


def main(argv=None):
    """The console script `easgd-train` (and `python -m tf_contrib_easgd.trainer`)."""
    _show_flags_in_help()
    command_line = list(sys.argv if argv is None else argv)
    app.run(
        lambda parsed: sys.exit(_main(parsed, command_line)), argv=argv, flags_parser=parse_flags
    )


if __name__ == "__main__":
    main()
