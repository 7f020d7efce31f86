"""Runs the benchmark suite and writes BENCHMARKS.md, results.json and the PNG plots.

    python -m benchmarks.run                # make bench: the full suite (~45 minutes)
    python -m benchmarks.run --quick        # make bench-quick: a smoke run under 5 minutes
    python -m benchmarks.run --sections=contrib --merge   # make bench-contrib (~5 minutes)

Sections (see BENCHMARKS.md for what each measures and why):

1. throughput: steps/s per worker of every configuration on a 1 ps + 2 worker cluster of
   real processes, configurations interleaved, repeated in rounds.
2. bytes: loopback bytes per local step of one worker, in a private network namespace.
3. accuracy: wall time until the shared model reaches a test accuracy on the digits.
keras (after 3): Keras `model.fit` with ElasticAverageCallback at tau 10 beside plain
   `model.fit`, the same model: throughput ratio and time to accuracy (`keras_section.py`).
4. overhead: per-step time of the wrapped optimizer alone vs inside EASGD, fresh processes.
5-6. shaped: throughput, bytes on the ps's link and time to accuracy with each task on a
   host of its own whose link is limited to 1 Gbit/s, then 100 Mbit/s (`shaped.py`), and
   the cost model fitted on them (`cost_model.py`); skipped where `ip netns`/`tc` are not.
   pinned: one worker on a core of its own and the ps on the other, at 1 Gbit/s.
exchange: one exchange alone, per process CPU and page faults, against memcpy
   (`exchange_cost.py`).
contrib (shown in section 1): the throughput of section 1 side by side with the original
   `tf.contrib.opt.ElasticAverageOptimizer` on TensorFlow 1.15 (`.venv-tf115`, made by
   `make test-contrib`), as ratios within each TensorFlow version; skipped without it.
   With --merge, the other sections of OUT/results.json are kept (the report says which
   run measured what).

Everything a section starts, it stops: processes are killed and namespaces deleted when
the section ends, also on error or Ctrl-C. This module holds the flags and `main`; the
measurements are `sections.py`'s and `contrib_section.py`'s, the report `report.py`'s.
"""

import json
import os
import pathlib
import shlex
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import exchange_cost, report, shaped
from benchmarks import specs as models
from benchmarks.cluster import BenchCluster
from benchmarks.contrib_section import CONTRIB_ROUNDS, contrib_section
from benchmarks.keras_section import keras_section
from benchmarks.provenance import ROOT, machine, source_revision
from benchmarks.sections import (
    ACCURACY_TARGET,
    per_step_overhead,
    throughput,
    time_to_accuracy,
    wire_bytes,
)
from tf_contrib_easgd.trainer import network

flags.DEFINE_bool("quick", False, "Smoke run: fewer configurations, rounds and seconds.")
flags.DEFINE_string(
    "out",
    None,
    "Folder for results.json and the plots (default: benchmarks/results, or a "
    "temporary folder with --quick).",
)
flags.DEFINE_string("report", None, "Markdown report to write (default: OUT/BENCHMARKS.md).")
SECTIONS = (
    "throughput",
    "bytes",
    "accuracy",
    "keras",
    "exchange",
    "overhead",
    "shaped",
    "pinned",
    "contrib",
)
flags.DEFINE_list("sections", list(SECTIONS), f"Sections to run, of {', '.join(SECTIONS)}.")
flags.register_validator(
    "sections", lambda names: set(names) <= set(SECTIONS), f"Sections are {', '.join(SECTIONS)}."
)
flags.DEFINE_integer("workers", 2, "Workers of the throughput and accuracy clusters.")
flags.DEFINE_integer(
    "rounds",
    None,
    "Throughput rounds (default: 3, or 1 with --quick; the shaped network: 3 at 1 Gbit/s "
    "and 2 at 100 Mbit/s).",
)
flags.DEFINE_bool("tf2", None, "Also measure in TF 2 graph mode (default: not with --quick).")
flags.DEFINE_string(
    "contrib_python",
    None,
    "Python of TensorFlow 1.15 with tf.contrib, for the contrib section (default: "
    ".venv-tf115/bin/python of the checkout, which `make test-contrib` builds).",
)
flags.DEFINE_bool(
    "merge",
    False,
    "With --sections=contrib: keep the other sections of OUT/results.json, a saved run, "
    "and re-render the report with them.",
)
FLAGS = flags.FLAGS

PERIODS = (1, 4, 10, 64)
EASGD = tuple(f"easgd-{p}" for p in PERIODS)
FULL_CONFIGS = (
    "local",
    "async",
    "sync",
    *EASGD,
    "easgd-10-remotecall",
    "naive-easgd-10",
    "copy-easgd-10",
)
QUICK_CONFIGS = ("local", "async", "sync", "easgd-1", "easgd-10", "easgd-64")
TF2_CONFIGS = (
    "local",
    "async",
    "easgd-10",
    "easgd-10-remotecall",
    "naive-easgd-10",
    "copy-easgd-10",
)
# (configuration, workers; None: all). EASGD with the paper's moving rate (beta = p * alpha =
# 0.9, so alpha = 0.9 / p) and with the library's default (0.9 / period / p).
PAPER_EASGD = "easgd-10-alpha0.45"
ACCURACY_CONFIGS = ((PAPER_EASGD, None), ("easgd-10", None), ("async", None), ("local", 1))
QUICK_ACCURACY_CONFIGS = ((PAPER_EASGD, None), ("async", None), ("local", 1))
#: Fresh processes the overhead section measures in, per world (blocks pooled).
OVERHEAD_PROCESSES = 2


def main(argv):
    del argv  # Unused.
    quick = FLAGS.quick
    default_out = pathlib.Path(tempfile.gettempdir()) / "easgd-bench-quick"
    out = pathlib.Path(FLAGS.out or (default_out if quick else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    report_path = pathlib.Path(FLAGS.report) if FLAGS.report else out / "BENCHMARKS.md"
    rounds = FLAGS.rounds or (1 if quick else 3)
    with_tf2 = (not quick) if FLAGS.tf2 is None else FLAGS.tf2
    started = time.time()
    log_lines = []

    def log(message):
        line = f"[{time.time() - started:6.0f} s] {message}"
        print(line, flush=True)
        log_lines.append(line)

    sections = set(FLAGS.sections)
    if FLAGS.merge and sections != {"contrib"}:
        raise app.UsageError("--merge takes --sections=contrib only")
    netns_reason = network.unavailable_reason()
    results = _results_skeleton(quick, netns_reason)
    log(f"load average {results['load_before']}; netns: {netns_reason or 'yes'}")
    saved = None
    if FLAGS.merge:
        saved = json.loads((out / "results.json").read_text())
        log(f"merging into {out / 'results.json'} (run of {saved['date']})")
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-logs-"))
    log(f"process logs: {logs}")
    if sections & {"throughput", "bytes", "accuracy"}:
        _tf1_sections(results, sections, quick, rounds, netns_reason, logs, log)
    if with_tf2 and "throughput" in sections:
        results["throughput_tf2"] = _tf2_throughput(rounds, netns_reason is None, logs, log)
    if "keras" in sections:
        results["keras"] = keras_section(
            FLAGS.workers, quick, rounds, netns_reason is None, logs, log
        )
    if "contrib" in sections:
        results["contrib"] = contrib_section(
            results,
            contrib_python=FLAGS.contrib_python,
            workers=FLAGS.workers,
            rounds=FLAGS.rounds or (1 if quick else CONTRIB_ROUNDS),
            seconds=3.0 if quick else 8.0,
            warm_secs=1.5 if quick else 3.0,
            netns=netns_reason is None,
            log_dir=logs,
            log=log,
        )
    if "exchange" in sections:
        results["exchange"] = exchange_cost.exchange_section(
            models.COMM_MLP.name,
            rounds=1 if quick else 3,
            count=10 if quick else 30,
            netns=netns_reason is None,
            log_dir=logs,
            log=log,
        )
    if "overhead" in sections:
        results["overhead"] = _overhead(quick, with_tf2, logs, log)
    if "shaped" in sections:
        results["shaped"] = shaped.shaped_section(
            models.COMM_MLP.name,
            FLAGS.workers,
            quick,
            rounds=FLAGS.rounds,
            log_dir=logs,
            log=log,
        )
    if "pinned" in sections:
        results["pinned"] = shaped.pinned_section(
            models.COMM_MLP.name, quick, FLAGS.rounds, logs, log
        )
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = duration = time.time() - started
    if saved is not None:
        saved["contrib"] = results["contrib"]
        results = saved
    _write(results, out, report_path, log_lines, merged=saved is not None)
    log(f"done in {duration:.0f} s: {report_path}, {out}/results.json, plots")


def _results_skeleton(quick, netns_reason):
    """The run's provenance (command, revision, machine, load), before any section."""
    return {
        "command": " ".join(
            shlex.quote(a) for a in ["python", "-m", "benchmarks.run", *sys.argv[1:]]
        ),
        "revision": source_revision(),
        "quick": quick,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": machine(),
        "load_before": os.getloadavg(),
        "workers": FLAGS.workers,
        "netns": netns_reason is None,
        "netns_skip_reason": netns_reason,
        "models": {
            spec.name: {"params": spec.num_params, "batch": spec.batch_size}
            for spec in models.MODELS.values()
        },
        "accuracy_target": ACCURACY_TARGET,
    }


def _tf1_sections(results, sections, quick, rounds, netns_reason, logs, log):
    """Runs those of sections 1 (TF1 mode), 2 and 3 in `sections` on one TF1 cluster."""
    with BenchCluster(1, FLAGS.workers, "tf1", logs / "tf1", netns=netns_reason is None) as cl:
        log(f"cluster up: 1 ps + {FLAGS.workers} workers (tf1), netns {cl.netns}")
        configs = QUICK_CONFIGS if quick else FULL_CONFIGS
        if "throughput" in sections:
            results["throughput"] = _tf1_throughput(cl, configs, quick, rounds, log)
        if "bytes" in sections:
            if netns_reason is None:
                log(f"bytes: {models.COMM_MLP.name}, one worker, netns {cl.netns}")
                window = {"warm_steps": 64, "steps": 64 if quick else 128}
                results["bytes_window"] = window
                results["bytes"] = wire_bytes(
                    cl,
                    models.COMM_MLP.name,
                    ("local", "async", "easgd-10", "easgd-64") if quick else configs,
                    steps=window["steps"],
                    warm_steps=window["warm_steps"],
                    log=log,
                )
            else:
                log(f"bytes: SKIPPED, {netns_reason}")
        if "accuracy" in sections:
            log(f"accuracy: {models.DIGITS_MLP.name} on digits, target {ACCURACY_TARGET}")
            results["accuracy"] = time_to_accuracy(
                cl,
                QUICK_ACCURACY_CONFIGS if quick else ACCURACY_CONFIGS,
                repeats=1 if quick else 2,
                seconds=10.0 if quick else 25.0,
                eval_every=0.5,
                log=log,
            )


def _tf1_throughput(cl, configs, quick, rounds, log):
    """Section 1 in TF1 mode: {model: throughput}, the CNN in half the rounds."""
    measured = {}
    model_list = [models.COMM_MLP] if quick else [models.COMM_MLP, models.COMPUTE_CNN]
    for spec in model_list:
        log(f"throughput: {spec.name}")
        measured[spec.name] = throughput(
            cl,
            spec.name,
            configs,
            rounds if spec is models.COMM_MLP else max(1, (rounds + 1) // 2),
            seconds=3.0 if quick else 8.0,
            warm_secs=1.5 if quick else 3.0,
            log=log,
        )
    return measured


def _tf2_throughput(rounds, netns, logs, log):
    """Section 1 in TF2 graph mode, on a TF2 cluster of its own: {model: throughput}."""
    with BenchCluster(1, FLAGS.workers, "tf2", logs / "tf2", netns=netns) as cl:
        log(f"cluster up: 1 ps + {FLAGS.workers} workers (tf2)")
        return {
            models.COMM_MLP.name: throughput(
                cl,
                models.COMM_MLP.name,
                TF2_CONFIGS,
                max(1, (rounds + 1) // 2),
                seconds=8.0,
                warm_secs=3.0,
                log=log,
            )
        }


def _overhead(quick, with_tf2, logs, log):
    """Section 4, no cluster: {world: per_step_overhead}."""
    by_world = {}
    for world in ("tf1", "tf2") if with_tf2 else ("tf1",):
        log(f"overhead: no cluster, fresh processes ({world})")
        by_world[world] = per_step_overhead(
            world,
            [models.TINY_MLP.name] if quick else [s.name for s in models.OVERHEAD],
            processes=1 if quick else OVERHEAD_PROCESSES,
            blocks=6 if quick else 8,
            block_secs=0.25,
            log_dir=logs,
            log=log,
        )
    return by_world


def _write(results, out, report_path, log_lines, merged):
    """Writes results.json, the log (run-contrib.log after --merge) and the report."""
    (out / "results.json").write_text(json.dumps(results, indent=1))
    log_name = "run-contrib.log" if merged else "run.log"
    (out / log_name).write_text("\n".join(log_lines) + "\n")
    report.write(results, out, report_path, replot=not merged)


if __name__ == "__main__":
    app.run(main)
