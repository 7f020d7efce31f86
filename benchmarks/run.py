"""Runs the benchmark suite; writes OUT/results.json, run.log, the plots and BENCHMARKS.md.

    python -m benchmarks.run                 # make bench: every section (~52 minutes)
    python -m benchmarks.run --quick         # make bench-quick: every section, under 5 minutes
    python -m benchmarks.run --sections=S --merge    # make bench-S: section S alone, merged
    python -m benchmarks.run --rerender      # BENCHMARKS.md from OUT/results.json

Sections: throughput.py (with contrib.py's side by side), wire_bytes.py, accuracy.py,
overhead.py, keras_fit.py, exchange.py, shaped.py (with pinned.py's run) and
larger_clusters.py; the block of strategies.py (`make bench-strategies`) is kept. Everything
a section starts it stops, on error too.
"""

import functools
import pathlib
import tempfile

from absl import app, flags

from benchmarks import (
    accuracy,
    contrib,
    exchange,
    keras_fit,
    larger_clusters,
    overhead,
    pinned,
    shaped,
    strategies_report,
    throughput,
    wire_bytes,
)
from benchmarks.common import network, protocol, report
from benchmarks.common.harness import BenchCluster

SECTIONS = ("throughput", "bytes", "accuracy", "keras", "exchange", "overhead", "shaped",
            "pinned", "contrib")  # fmt: skip
WORKERS = 2
FLAGS = flags.FLAGS
#: Each section's keys of the results (the others are the run's: command, machine, ...).
KEYS = {section: (section,) for section in SECTIONS}
KEYS.update(throughput=("throughput", "throughput_tf2"), bytes=("bytes", "bytes_window"))
#: The sections whose results keep the run that measured them (their text says which).
OWN_RUN = ("contrib", "pinned")
#: The plots each section draws; with --merge, the others' are kept as they are.
PLOTS = {"throughput": throughput.plot, "accuracy": accuracy.plot, "shaped": shaped.plot}


def measure(results, log):
    """Runs the sections of --sections into `results`."""
    quick, sections, reason = results["quick"], set(FLAGS.sections), network.unavailable_reason()
    models = {
        s.name: {"params": s.num_params, "batch": s.batch_size} for s in protocol.MODELS.values()
    }
    results.update(workers=WORKERS, netns=reason is None, netns_skip_reason=reason,
                   accuracy_target=0.97, models=models)  # fmt: skip
    logs, netns = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-logs-")), reason is None
    log(f"netns: {reason or 'yes'}; process logs: {logs}")
    # Sections 1 to 3 share one TF1 cluster over loopback; section 1 adds a TF2 one.
    if sections & {"throughput", "bytes", "accuracy"}:
        with BenchCluster(WORKERS, logs / "tf1", netns=netns) as cluster:
            log(f"cluster up: 1 ps + {WORKERS} workers (tf1), netns {cluster.netns}")
            if "throughput" in sections:
                results["throughput"] = throughput.measure_tf1(cluster, quick, log)
            if "bytes" in sections and netns:
                results.update(wire_bytes.measure(cluster, quick, log))
            if "accuracy" in sections:
                results["accuracy"] = accuracy.measure(cluster, quick, log)
    if not quick and "throughput" in sections:
        results["throughput_tf2"] = throughput.measure_tf2(WORKERS, netns, logs, log)
    if "overhead" in sections:
        results["overhead"] = overhead.measure(quick, logs, log)
    if "keras" in sections:
        results["keras"] = keras_fit.measure(WORKERS, quick, netns, logs, log)
    if "contrib" in sections:
        python = FLAGS.contrib_python
        results["contrib"] = contrib.measure(results, python, WORKERS, quick, netns, logs, log)
    if "exchange" in sections:
        results["exchange"] = exchange.measure(quick, netns, logs, log)
    results.update(shaped.measure(results, sections, protocol.COMM_MLP.name, WORKERS, logs, log))


def render(results, plots):
    """The Markdown report; `plots`: {name: image path relative to the report}."""
    rows = [
        *throughput.targets(results),
        *overhead.targets(results),
        *wire_bytes.targets(results),
        *accuracy.targets(results),
        *keras_fit.targets(results),
        *shaped.targets(results),
    ]
    status = {None: "skipped", True: "**met**", False: "**not met**"}
    out = [
        "# Benchmarks",
        "",
        *report.header(results, "make bench"),
        f"1 ps + {results['workers']} workers, each an OS process, gRPC over loopback"
        + (" in a private network namespace" if results["netns"] else "")
        + ". Compare ratios within a table, not across runs. Re-render: `python -m "
        "benchmarks.run --rerender`.",
        "",
        "## Targets",
        "",
        "Made by `benchmarks/run.py` from every section's targets; `make bench` measures them all.",
        "",
        report.table("-target | -measured | -status", [(t, m, status[f]) for t, m, f in rows]),
        "",
    ]
    if results["load_before"][0] > (results["machine"]["cores"] or 1):
        out += [OVERLOADED, ""]
    out += throughput.render(results, plots)
    out += contrib.render(results) if "contrib" in results else []
    out += wire_bytes.render(results) + accuracy.render(results, plots) + overhead.render(results)
    out += keras_fit.render(results) + exchange.render(results)
    out += shaped.render(results, plots) + pinned.section(results) + larger_clusters.render(results)
    return "\n".join(out).rstrip() + "\n"


def merge(saved, results, sections):
    """`saved` (OUT/results.json) with `sections` measured anew in `results`, each of them
    remembering this run (`section_runs`) where its results do not."""
    keys = {key for section in sections for key in KEYS[section]}
    merged = {key: value for key, value in saved.items() if key not in keys}
    merged.update({key: results[key] for key in keys if key in results})
    runs = {s: run for s, run in saved.get("section_runs", {}).items() if s not in sections}
    runs.update({s: report.own_run(results) for s in sections if s not in OWN_RUN})
    return {**merged, "section_runs": runs} if runs else merged


def write(results, out, report_path):
    """Draws the plots into `out` (with --merge, only those of the sections measured, the
    others' kept as they are there) and writes the report."""
    paths, drawn = {}, PLOTS
    if FLAGS.merge:
        names = ("throughput", "accuracy", "shaped_throughput", "shaped_accuracy")
        paths = {name: out / f"{name}.png" for name in names if (out / f"{name}.png").is_file()}
        drawn = () if FLAGS.rerender else [s for s in FLAGS.sections if s in PLOTS]
    for section in drawn:
        paths.update(PLOTS[section](results, out))
    plots = {name: report.relative(path, report_path.parent) for name, path in paths.items()}
    # `make bench-strategies` writes a block of its own into the report: kept as it was.
    kept = strategies_report.kept_block(report_path)
    report_path.write_text(render(results, plots) + (f"\n{kept}" if kept else ""))


def main(argv):
    del argv  # Unused: the results record the whole command line.
    update = functools.partial(merge, sections=FLAGS.sections) if FLAGS.merge else None
    log_name = f"run-{'-'.join(FLAGS.sections)}.log" if FLAGS.merge else "run.log"
    report.drive("benchmarks.run", "results", "BENCHMARKS.md", measure, write, log_name, update)


OVERLOADED = (
    "**The machine was overloaded before this run** (load above its cores): trust the "
    "per-round ratios and the byte counts more than absolute steps/s."
)


def define_flags():
    """The flags of `main`: defined when run, not at import (the tests import this module
    beside others that define --out and --report)."""
    report.define_flags("results", "BENCHMARKS.md")
    flags.DEFINE_list("sections", list(SECTIONS), f"Sections to run, of {', '.join(SECTIONS)}.")
    flags.register_validator("sections", lambda names: set(names) <= set(SECTIONS),
                             f"Sections are {', '.join(SECTIONS)}.")  # fmt: skip
    flags.DEFINE_string("contrib_python", None, "Python of TensorFlow 1.15 with tf.contrib "
                        "(default: .venv-tf115/bin/python of the checkout).")  # fmt: skip
    flags.DEFINE_bool("merge", False, "Keep the sections not in --sections of OUT/results.json "
                      "and re-render the report with them (make bench-SECTION).")  # fmt: skip


if __name__ == "__main__":
    define_flags()
    app.run(main)
