"""python -m soak: a chaos soak of easgd-train (make soak; needs root and `ip netns`).

--ps parameter servers (1 or 2) and --workers workers of easgd-train run in task mode,
each in a network namespace of its own, while a seeded random schedule of --faults faults
hits them one at a time: SIGKILL and restart of a worker, the chief or a ps (with 2, each
in turn); SIGSTOP then SIGCONT of any task;
a task's link cut, then restored. It prints a line per fault, then a table of what each
cost, the checks and the verdict; the exit code is 0 when every check passed, 1 when one
failed, 2 when the soak cannot run here. docs/RELIABILITY.md, "Chaos soak", says what is
checked and shows the figures of one run.

    python -m soak                        # ~11 minutes, seed 0, 1 ps + 3 workers, 20 faults
    python -m soak --seed=7 --faults=30 --minutes=15 --out=/tmp/soak.json
    python -m soak --ps=2 --seed=38       # the centre spread over 2 ps; either restarted
"""

import json
import os
import sys
import tempfile

from absl import app, flags

from benchmarks.common import network
from soak import measure, report, runner
from soak import schedule as schedule_module

#: Local steps per second of one worker of the soak's job between faults on the 2-core
#: machine of docs/RELIABILITY.md (3 workers and the ps sharing both cores): --steps is
#: sized from --minutes with it.
STEPS_PER_SEC = 280
#: Of a soak's minutes, the seconds that are no training: the start and the end.
START_AND_END_SECS = 60

FLAGS = flags.FLAGS
flags.DEFINE_integer("seed", 0, "Seed of the schedule and of the job (--seed of the tasks).")
flags.DEFINE_float("minutes", 10.0, "About how long the soak lasts; sizes --steps.", lower_bound=2)
flags.DEFINE_integer("workers", 3, "Workers of the job.", lower_bound=2, upper_bound=3)
flags.DEFINE_integer(
    "ps",
    1,
    "Parameter servers of the job; easgd-train spreads the centre's variables over them.",
    lower_bound=1,
    upper_bound=schedule_module.MAX_PS,
)
flags.DEFINE_integer("faults", 20, "Faults of the schedule.", lower_bound=1)
flags.DEFINE_integer(
    "steps", 0, "Local steps of each worker; 0: sized from --minutes.", lower_bound=0
)
flags.DEFINE_integer(
    "save_checkpoint_steps",
    2000,
    "The chief's checkpoint interval in local steps: what a ps restart may lose.",
    lower_bound=1,
)
flags.DEFINE_float(
    "startup_secs",
    measure.Bounds.startup_secs,
    "The bound of a task's start-up (exec to first session) that the checks assume.",
)
flags.DEFINE_float(
    "slack_secs",
    measure.Bounds.slack_secs,
    "How far beyond its bound a fault may cost before a task counts as stuck.",
)
flags.DEFINE_float("min_accuracy", 0.95, "The centre's test accuracy the job must reach.")
flags.DEFINE_string("work_dir", None, "Where the job's files go (default: a new temp dir).")
flags.DEFINE_string("out", None, "Write the soak's record (JSON, events included) here.")
flags.DEFINE_string(
    "py_spy",
    None,
    "py-spy, to dump the stacks of a worker silent for 8 s into WORK_DIR/stacks/ (default: "
    "py-spy on PATH, if any; '' for none).",
)


def soak_config(work_dir, echo=print):
    """The `runner.SoakConfig` of the flags."""
    steps = FLAGS.steps or int(STEPS_PER_SEC * (FLAGS.minutes * 60 - START_AND_END_SECS))
    schedule = schedule_module.make_schedule(FLAGS.seed, FLAGS.faults, FLAGS.workers, ps=FLAGS.ps)
    return runner.SoakConfig(
        schedule=tuple(schedule),
        work_dir=work_dir,
        workers=FLAGS.workers,
        ps=FLAGS.ps,
        steps=steps,
        seed=FLAGS.seed,
        save_checkpoint_steps=FLAGS.save_checkpoint_steps,
        eval_every_steps=max(steps // 10, 1),
        bounds=measure.Bounds(startup_secs=FLAGS.startup_secs, slack_secs=FLAGS.slack_secs),
        min_accuracy=FLAGS.min_accuracy,
        deadline_secs=max(3 * FLAGS.minutes * 60, 900),
        py_spy=FLAGS.py_spy,
        echo=echo,
    )


def main(argv):
    if len(argv) > 1:
        print(f"soak: error: unexpected arguments {argv[1:]}", file=sys.stderr)
        return 2
    reason = network.unavailable_reason()
    if reason:
        print(
            f"soak: cannot run here: {reason}. The soak puts each task in a network namespace "
            "of its own to cut its link: run it as root on Linux with iproute2 "
            "(sudo make soak).",
            file=sys.stderr,
        )
        return 2
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="easgd-soak-")
    config = soak_config(work_dir, echo=lambda line: print(line, flush=True))
    print(
        f"soak: seed {config.seed}, {config.ps} ps + {config.workers} workers, "
        f"{config.steps} steps each, {len(config.schedule)} faults; files in {work_dir}",
        flush=True,
    )
    for fault in config.schedule:
        print(
            f"  #{fault.index} {fault.kind} {fault.target}"
            + (f" {fault.duration_secs:g} s" if fault.duration_secs else "")
            + f" at {100 * fault.at_fraction:.0f} % of the steps",
            flush=True,
        )
    record = runner.run(config)
    print("\n" + report.text(record), flush=True)
    if FLAGS.out:
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.out)), exist_ok=True)
        with open(FLAGS.out, "w", encoding="utf-8") as file:
            json.dump(record, file, indent=1, default=str)
        print(f"record: {FLAGS.out}")
    return 0 if record["passed"] else 1


def _parse_flags(argv):
    """Parses the flags as absl does, but help exits with 0 (absl's exits with 1)."""
    try:
        return FLAGS(argv)
    except flags.Error as error:
        print(f"soak: error: {error}", file=sys.stderr)
        sys.exit(2)
    except SystemExit as done:
        sys.exit(0 if done.code == 1 else done.code)


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)), flags_parser=_parse_flags)
