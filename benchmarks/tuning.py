"""How to choose EASGD's tau, alpha and rho: a measured grid on the embedded digits.

    python -m benchmarks.tuning --out=benchmarks/results --report=docs/TUNING.md
                                                   # make bench-tuning (~17 minutes)
    python -m benchmarks.tuning --quick            # a smoke run (~2 minutes), temp folder
    python -m benchmarks.tuning --rerender         # docs/TUNING.md from saved results

The set-up is section 3 of BENCHMARKS.md (`sections.time_to_accuracy`): the digits MLP
(2.2 M parameters), SGD with learning rate 0.05, batch 32 per worker, on a cluster of real
processes (1 ps + 2 workers, `cluster.BenchCluster`) talking gRPC over loopback, each
worker with its own session as TF1 scripts have. The workers run `tuning_task.py`, which
is task.py's worker plus the configurations of the grid:

- communication period tau in `PERIODS`;
- moving rate alpha: the library's default (contrib's, 0.9 / tau / workers) and the
  paper's (beta = workers x alpha = 0.9, so 0.9 / workers whatever tau); at tau = 1 they
  are the same, measured once;
- rho: 0 (no pull between exchanges) and the library's default (moving_rate /
  learning_rate: a pull of alpha x (x - local centre) on every local step);

and, as references, async SGD (the same workers, the variables on the ps) and one worker
training alone (`local`). Each configuration trains for a fixed wall time from a common
start; worker 0 evaluates the shared model (the EASGD centre, the ps variables, its own
variables) on the test split every `LOG_EVERY` of its local steps, and every worker logs
its step count there. A repeat runs every configuration once (in forward order on even
repeats, backward on odd ones); the figures are medians over the repeats.

Writes OUT/tuning.json, OUT/tuning.log, OUT/tuning.png and the generated block of the
report (docs/TUNING.md: the text between its two `tuning_report.BEGIN`/`END` markers).
`--out`, `--report`, `--quick` and `--workers` are run.py's flags (importing it defines
them), with the defaults above here; run.py's other flags do not apply.
"""

import os
import pathlib
import shlex
import statistics
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import (
    run,  # noqa: F401 - defines --out, --report, --quick, --workers.
    tuning_report,
)
from benchmarks import specs as models
from benchmarks.cluster import BenchCluster, wall_time_in
from benchmarks.provenance import ROOT, machine, source_revision
from benchmarks.sections import (
    ACCURACY_LEARNING_RATE,
    ACCURACY_TARGET,
    CALL_TIMEOUT_SECS,
    build_config,
    release,
)
from tf_contrib_easgd.trainer import network

flags.DEFINE_integer("repeats", None, "Repeats of the grid (default: 3, or 1 with --quick).")
flags.DEFINE_float(
    "seconds", None, "Wall time each configuration trains (default: 18, or 6 with --quick)."
)
flags.DEFINE_bool("rerender", False, "Only re-render the report from OUT/tuning.json.")
FLAGS = flags.FLAGS

#: run.py's flags that mean nothing here.
_RUN_ONLY_FLAGS = ("sections", "rounds", "tf2", "contrib_python", "merge")

PERIODS = (1, 4, 10, 32)
#: The paper's beta = workers x alpha.
PAPER_BETA = 0.9
#: Worker 0 evaluates, and every worker logs its steps, every this many of its local steps.
LOG_EVERY = 20
DEFAULT = "default"


def easgd_name(period, alpha, rho):
    """The tuning_task.py configuration: alpha and rho are numbers or DEFAULT."""
    return f"easgd-{period}-alpha{alpha}-rho{rho}"


def grid(workers, quick=False):
    """The measured configurations, each a dict of its name, workers and grid coordinates.

    Keys: "name", "workers", "kind" (local, async or easgd) and, for EASGD, "period",
    "alpha_rule" (contrib, paper, or contrib = paper at tau = 1) and "rho_rule" (0 or
    default).
    """
    configs = [
        {"name": "local", "workers": 1, "kind": "local"},
        {"name": "async", "workers": workers, "kind": "async"},
    ]
    paper = f"{PAPER_BETA / workers:g}"
    for period in (10,) if quick else PERIODS:
        rules = [("contrib", DEFAULT), ("paper", paper)] if period > 1 else [("both", DEFAULT)]
        for alpha_rule, alpha in rules:
            for rho in ("0", DEFAULT):
                if quick and (alpha_rule, rho) == ("contrib", DEFAULT):
                    continue
                configs.append(
                    {
                        "name": easgd_name(period, alpha, rho),
                        "workers": workers,
                        "kind": "easgd",
                        "period": period,
                        "alpha_rule": alpha_rule,
                        "rho_rule": rho,
                    }
                )
    return configs


def measure(cluster, configs, repeats, seconds, log):
    """Trains every configuration `repeats` times, interleaved.

    Returns:
        {name: [run]}: each run a dict of "repeat", "load_1min" (load average before it),
        "cluster_cpu_secs" (CPU time of the cluster's processes during it), "span_secs" (the
        wall time of that span: the 1 s wait for the common start, the window, worker 0's
        final evaluation), "workers" (each worker's `train_logged` answer) and worker 0's
        `finish` answer (the final accuracy, global_step, and for EASGD the moving rate and
        rho in effect).
    """
    results = {config["name"]: [] for config in configs}
    for repeat in range(repeats):
        order = configs if repeat % 2 == 0 else configs[::-1]
        for config in order:
            name, team = config["name"], list(range(config["workers"]))
            # sections.py's build_config and release: the same builds, transport check, clean-up.
            container = build_config(
                cluster,
                name,
                models.DIGITS_MLP.name,
                team,
                learning_rate=ACCURACY_LEARNING_RATE,
            )
            load, cpu, span = os.getloadavg()[0], cluster.cpu_seconds(), time.monotonic()
            answers = cluster.call_all(
                team,
                "train_logged",
                CALL_TIMEOUT_SECS,
                start_at=wall_time_in(1.0),
                seconds=seconds,
                log_every=LOG_EVERY,
            )
            finish = cluster.call(0, "finish", CALL_TIMEOUT_SECS)
            cpu, span = cluster.cpu_seconds() - cpu, time.monotonic() - span
            release(cluster, team, container)
            finish.pop("ok", None)
            entry = {
                "repeat": repeat,
                "load_1min": load,
                "cluster_cpu_secs": cpu,
                "span_secs": span,
                "workers": [{"steps": a["steps"], "log": a["log"]} for a in answers],
                **finish,
            }
            results[name].append(entry)
            reached = tuning_report.reach(entry, ACCURACY_TARGET, config)
            log(
                f"  {name:>28} x{len(team)} repeat {repeat}: final {finish['accuracy']:.3f}, "
                f"steps {statistics.fmean(a['steps'] for a in answers):.0f}, "
                + (
                    f"{ACCURACY_TARGET} after {reached['secs']:.1f} s, {reached['steps']:.0f} steps"
                    if reached
                    else f"{ACCURACY_TARGET} not reached"
                )
            )
    return results


def main(argv):
    del argv  # Unused.
    present = [name for name in _RUN_ONLY_FLAGS if FLAGS[name].present]
    if present:
        raise app.UsageError(f"not flags of benchmarks.tuning: {', '.join(present)}")
    quick = FLAGS.quick
    default_out = pathlib.Path(tempfile.gettempdir()) / "easgd-bench-tuning-quick"
    out = pathlib.Path(FLAGS.out or (default_out if quick else ROOT / "benchmarks/results"))
    out.mkdir(parents=True, exist_ok=True)
    if FLAGS.report:
        report_path = pathlib.Path(FLAGS.report)
    else:
        report_path = out / "TUNING.md" if quick else ROOT / "docs" / "TUNING.md"
    if FLAGS.rerender:
        results = tuning_report.load(out / "tuning.json")
        tuning_report.write(results, out, report_path)
        print(f"rendered {report_path} from {out / 'tuning.json'}")
        return
    repeats = FLAGS.repeats or (1 if quick else 3)
    seconds = FLAGS.seconds or (6.0 if quick else 18.0)
    started = time.time()
    log_lines = []

    def log(message):
        line = f"[{time.time() - started:6.0f} s] {message}"
        print(line, flush=True)
        log_lines.append(line)

    netns_reason = network.unavailable_reason()
    configs = grid(FLAGS.workers, quick)
    results = {
        "command": " ".join(
            shlex.quote(a) for a in ["python", "-m", "benchmarks.tuning", *sys.argv[1:]]
        ),
        "revision": source_revision(),
        "quick": quick,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_before": os.getloadavg(),
        "netns": netns_reason is None,
        "model": {
            "name": models.DIGITS_MLP.name,
            "params": models.DIGITS_MLP.num_params,
            "batch": models.DIGITS_MLP.batch_size,
        },
        "learning_rate": ACCURACY_LEARNING_RATE,
        "target": ACCURACY_TARGET,
        "repeats": repeats,
        "seconds": seconds,
        "log_every": LOG_EVERY,
        "paper_beta": PAPER_BETA,
        "configs": configs,
    }
    log(f"load average {results['load_before']}; netns: {netns_reason or 'yes'}")
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-tuning-logs-"))
    log(f"process logs: {logs}; {len(configs)} configurations x {repeats} repeats x {seconds} s")
    with BenchCluster(
        1,
        FLAGS.workers,
        "tf1",
        logs,
        netns=netns_reason is None,
        module="benchmarks.tuning_task",
    ) as cluster:
        log(f"cluster up: 1 ps + {FLAGS.workers} workers (tf1), netns {cluster.netns}")
        results["runs"] = measure(cluster, configs, repeats, seconds, log)
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = duration = time.time() - started
    tuning_report.save(results, out / "tuning.json")
    (out / "tuning.log").write_text("\n".join(log_lines) + "\n")
    tuning_report.write(results, out, report_path)
    log(f"done in {duration:.0f} s: {report_path}, {out}/tuning.json, tuning.png")


if __name__ == "__main__":
    app.run(main)
