"""Runs the benchmark suite; writes OUT/results.json, run.log, the plots and BENCHMARKS.md.

    python -m benchmarks.run                 # make bench: every section (~45 minutes)
    python -m benchmarks.run --quick         # make bench-quick: every section, under 5 minutes
    python -m benchmarks.run --sections=contrib --merge   # make bench-contrib
    python -m benchmarks.run --rerender      # BENCHMARKS.md from OUT/results.json

Sections: loopback.py (throughput, bytes, accuracy, overhead), keras_fit.py, exchange.py,
shaped.py (shaped, pinned), contrib.py. Everything a section starts it stops, on error too.
"""

import json
import os
import pathlib
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import contrib, exchange, keras_fit, loopback, provenance, shaped, specs
from benchmarks.tables import status, table
from tf_contrib_easgd.trainer import network

SECTIONS = ("throughput", "bytes", "accuracy", "keras", "exchange", "overhead", "shaped",
            "pinned", "contrib")  # fmt: skip
provenance.define_flags("results", "BENCHMARKS.md")
flags.DEFINE_list("sections", list(SECTIONS), f"Sections to run, of {', '.join(SECTIONS)}.")
flags.register_validator("sections", lambda names: set(names) <= set(SECTIONS),
                         f"Sections are {', '.join(SECTIONS)}.")  # fmt: skip
flags.DEFINE_integer("workers", 2, "Workers of the clusters.")
flags.DEFINE_integer("rounds", None, "Throughput rounds (default: 3, or 1 with --quick; "
                     "shaped: 3 at 1 Gbit/s, 2 at 100 Mbit/s).")  # fmt: skip
flags.DEFINE_bool("tf2", None, "Also measure in TF 2 graph mode (default: not with --quick).")
flags.DEFINE_string("contrib_python", None, "Python of TensorFlow 1.15 with tf.contrib "
                    "(default: .venv-tf115/bin/python of the checkout).")  # fmt: skip
flags.DEFINE_bool("merge", False, "With --sections=contrib: keep the other sections of "
                  "OUT/results.json and re-render the report with them.")  # fmt: skip
FLAGS = flags.FLAGS


def main(argv):
    del argv  # Unused: run_record takes the whole command line.
    quick, sections = FLAGS.quick, set(FLAGS.sections)
    if FLAGS.merge and sections != {"contrib"}:
        raise app.UsageError("--merge takes --sections=contrib only")
    out, report_path = provenance.outputs("BENCHMARKS.md")
    if FLAGS.rerender:
        write(json.loads((out / "results.json").read_text()), out, report_path)
        return
    rounds = FLAGS.rounds or (1 if quick else 3)
    with_tf2 = (not quick) if FLAGS.tf2 is None else FLAGS.tf2
    log, reason = provenance.RunLog(), network.unavailable_reason()
    netns = reason is None
    models = {
        s.name: {"params": s.num_params, "batch": s.batch_size} for s in specs.MODELS.values()
    }
    results = {
        **provenance.run_record("benchmarks.run", sys.argv, quick), "workers": FLAGS.workers,
        "netns": netns, "netns_skip_reason": reason, "accuracy_target": 0.97, "models": models,
    }  # fmt: skip
    log(f"load average {results['load_before']}; netns: {reason or 'yes'}")
    saved = json.loads((out / "results.json").read_text()) if FLAGS.merge else None
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-logs-"))
    log(f"process logs: {logs}")
    loopback.measure(results, sections, FLAGS.workers, quick, rounds, with_tf2, netns, logs, log)
    if "keras" in sections:
        results["keras"] = keras_fit.measure(FLAGS.workers, quick, rounds, netns, logs, log)
    if "contrib" in sections:
        contrib_rounds = FLAGS.rounds or (1 if quick else contrib.ROUNDS)
        window = (3.0, 1.5) if quick else (8.0, 3.0)
        results["contrib"] = contrib.measure(results, FLAGS.contrib_python, FLAGS.workers,
                                             contrib_rounds, *window, netns, logs, log)  # fmt: skip
    if "exchange" in sections:
        count = (1, 10) if quick else (3, 30)
        results["exchange"] = exchange.measure(*count, netns, logs, log)
    mlp = specs.COMM_MLP.name
    if "shaped" in sections:
        results["shaped"] = shaped.measure(mlp, FLAGS.workers, quick, FLAGS.rounds, logs, log)
    if "pinned" in sections:
        results["pinned"] = shaped.measure_pinned(mlp, quick, FLAGS.rounds, logs, log)
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = time.time() - log.started
    if saved is not None:
        results = {**saved, "contrib": results["contrib"]}
    log_name = "run-contrib.log" if saved else "run.log"
    provenance.save(results, log, out / "results.json", out / log_name)
    write(results, out, report_path, replot=saved is None)
    log(f"done in {results['duration_secs']:.0f} s: {report_path}, {out}/results.json, plots")


def render(results, plots):
    """The Markdown report; `plots`: {name: image path relative to the report}."""
    rows = loopback.targets(results) + keras_fit.targets(results) + shaped.targets(results)
    overloaded = results["load_before"][0] > (results["machine"]["cores"] or 1)
    out = [
        "# Benchmarks",
        "",
        *provenance.header(results, "make bench"),
        f"1 ps + {results['workers']} workers, each an OS process, gRPC over loopback"
        + (" in a private network namespace" if results["netns"] else "")
        + ". Compare ratios within a table, not across runs. Re-render: `python -m "
        "benchmarks.run --rerender`.",
        "",
        "## Targets",
        "",
        table("-target | -measured | -status", [(t, m, status(f)) for t, m, f in rows]),
        "",
    ]
    if overloaded:
        out += [
            "**The machine was overloaded before this run** (load above its cores): trust "
            "the per-round ratios and the byte counts more than absolute steps/s.",
            "",
        ]
    out += loopback.render(results, plots) + keras_fit.render(results) + exchange.render(results)
    return "\n".join(out + shaped.render(results, plots)).rstrip() + "\n"


def write(results, out, report_path, replot=True):
    """Draws the plots into `out` (with `replot=False`, keeps those there) and writes the
    report to `report_path`."""
    out, report_path = pathlib.Path(out), pathlib.Path(report_path)
    names = {"throughput", "accuracy", "shaped_throughput", "shaped_accuracy"}
    if replot:
        paths = {**loopback.plot(results, out), **shaped.plot(results, out)}
    else:
        paths = {name: out / f"{name}.png" for name in names if (out / f"{name}.png").is_file()}
    plots = {name: provenance.relative(path, report_path.parent) for name, path in paths.items()}
    report_path.write_text(render(results, plots))


if __name__ == "__main__":
    app.run(main)
