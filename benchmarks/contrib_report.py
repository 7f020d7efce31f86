"""The report's side by side with contrib on TensorFlow 1.15, within section 1.

Renders the figures of `contrib_section.py`, which may come from a run of their own
(`run.py --sections=contrib --merge`).
"""

import statistics

from benchmarks.provenance import revision_text
from benchmarks.tables import per_round, per_round_ratio, ratio_text, summarize_throughput

#: The contrib section's rows: (side, configuration, its local-only reference).
CONTRIB_ROWS = (
    ("contrib", "local", "local"),
    ("contrib", "contrib-easgd-10", "local"),
    ("package", "local", "local"),
    ("package", "easgd-10", "local"),
)


def contrib_ratio_of_ratios(section):
    """(easgd-10 / local of the package) / (contrib-easgd-10 / local of contrib).

    Returns:
        (ratio of the medians' ratios, median over rounds of the rounds' ratios), or None
        when a configuration is missing.
    """
    runs = section["runs"]
    try:
        ours, our_local = runs["package"]["easgd-10"], runs["package"]["local"]
        theirs, their_local = runs["contrib"]["contrib-easgd-10"], runs["contrib"]["local"]
    except KeyError:
        return None
    medians = [statistics.median(per_round(r)) for r in (ours, our_local, theirs, their_local)]
    of_medians = (medians[0] / medians[1]) / (medians[2] / medians[3])
    rounds = zip(
        per_round(ours),
        per_round(our_local),
        per_round(theirs),
        per_round(their_local),
        strict=True,
    )
    in_round = statistics.median((a / b) / (c / d) for a, b, c, d in rounds)
    return of_medians, in_round


def contrib_table(section):
    versions = section["versions"]
    lines = [
        "| TensorFlow | configuration | steps/s per worker (median) | min | max "
        "| x local-only (same TensorFlow) | x local-only, per round "
        "| ms per local step over local-only |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side, config, reference in CONTRIB_ROWS:
        by_config = section["runs"].get(side, {})
        if config not in by_config:
            continue
        median, low, high = summarize_throughput(by_config)[config]
        base = summarize_throughput(by_config)[reference][0]
        in_round = per_round_ratio(by_config, config, reference)
        extra_ms = (1 / median - 1 / base) * 1e3
        lines.append(
            f"| {versions[side]['tensorflow']} ({side}) | {config} | {median:.1f} | {low:.1f} "
            f"| {high:.1f} | {ratio_text(median, base)} | {in_round:.2f} | {extra_ms:+.1f} |"
        )
    return "\n".join(lines)


def separate_run(results, section):
    """Whether a section's own "run" is not the run of the report's header."""
    run = section.get("run", {})
    return (run.get("command"), run.get("date")) != (results["command"], results["date"])


def contrib_part(results):
    """The contrib section's lines, within section 1."""
    section = results["contrib"]
    run = section["run"]
    out = ["### Side by side with contrib on TensorFlow 1.15", ""]
    if "skipped" in section:
        return [*out, f"Skipped: {section['skipped']}.", ""]
    versions = section["versions"]
    theirs = f"{versions['contrib']['tensorflow']} (Python {versions['contrib']['python']})"
    ours = f"{versions['package']['tensorflow']} (Python {versions['package']['python']})"
    load = "; after: ".join(
        ", ".join(f"{x:.2f}" for x in run[key]) for key in ("load_before", "load_after")
    )
    where = (
        "a run of its own, not the run of the header"
        if separate_run(results, section)
        else "the run of the header"
    )
    out += [
        _STATIC_CONTRIB,
        "",
        f"Measured in {where}: `{run['command']}` at {revision_text(run['revision'])}; "
        f"{run['date']}, {run['duration_secs'] / 60:.1f} min"
        + (" (quick smoke run)" if run.get("quick") else "")
        + f"; load average (1, 5, 15 min) before: {load}. TensorFlow {theirs} with "
        f"`tf.contrib` against TensorFlow {ours}.",
        "",
    ]
    prints = section["fingerprints"]
    first = prints["contrib"]["local"][0]
    losses = {
        side: sorted({f"{p['loss']:.6f}" for by in prints[side].values() for p in by[:1]})
        for side in ("contrib", "package")
    }
    idle = section.get("idle_cpu_per_sec")
    if idle is not None:
        out += [
            f"The waiting cluster's processes used {idle * 1e3:.1f} ms of CPU per second of "
            "the other's windows (warm-up and measured window).",
            "",
        ]
    out += [
        f"The same start on both sides, checked before the window of every build: each "
        f"worker's {first['variables']} variables (names, shapes, initial values) and its batch "
        f"had the same SHA-256 digests under both TensorFlows (worker 0: parameters "
        f"`{first['params'][:12]}`, batch `{first['batch'][:12]}`), and worker 0's loss on it "
        f"was {' / '.join(losses['contrib'])} under {versions['contrib']['tensorflow']} and "
        f"{' / '.join(losses['package'])} under {versions['package']['tensorflow']}.",
        "",
    ]
    rounds = len(next(iter(section["runs"]["contrib"].values())))
    out += [
        f"**{section['model']}** ({results['models'][section['model']]['params']:,} "
        f"parameters, batch {results['models'][section['model']]['batch']}), TF1 mode (ref "
        f"variables) on both sides, {rounds} interleaved rounds:",
        "",
        contrib_table(section),
        "",
    ]
    ratios = contrib_ratio_of_ratios(section)
    if ratios:
        out += [
            f"Ratio of ratios, (`easgd-10` / `local`, TensorFlow "
            f"{versions['package']['tensorflow']}) / (`contrib-easgd-10` / `local`, TensorFlow "
            f"{versions['contrib']['tensorflow']}): **{ratios[0]:.2f}** (ratio of the medians' "
            f"ratios); {ratios[1]:.2f} (median of the rounds' ratios of ratios).",
            "",
        ]
    return out


_STATIC_CONTRIB = """\
The original `tf.contrib.opt.ElasticAverageOptimizer` runs on TensorFlow 1.15 only (the last
release with `tf.contrib`, on Python 3.7), in `.venv-tf115` (`make test-contrib` makes it),
so it runs in a cluster of its own: again 1 ps + 2 workers, separate processes on loopback
ports (in a network namespace of their own when the run has one), driven by the same harness
(`benchmarks/contrib_task.py` answers `run.py` as `benchmarks/task.py` does: the same
warm-up, the same common window, the same session `ConfigProto`). Its model is rebuilt
from the same spec by `benchmarks/models_py37.py` (Python 3.7 code: `models.py` is not),
with the same variables, initialisers and forward pass; its batches are the arrays of
`specs.synthetic_batch`, handed over in a file. Both clusters stay up for the whole
section, and each round runs the four configurations one after the other (forward order on
even rounds, backward on odd ones) while the other cluster waits idle (its CPU time during
the other's windows is measured, below).
`local` = the same model, each worker training alone (the ceiling of that build);
`contrib-easgd-10` = contrib's `ElasticAverageOptimizer(GradientDescentOptimizer)` with
period 10, the default moving rate and `rho=0`, built as `easgd-10` is (the getter inside a
`replica_device_setter`); `easgd-10` = this package's, as above. TensorFlow 1.15.5's wheel
and TensorFlow 2.x's are different builds (compiler flags, Eigen, oneDNN; on this machine
1.15.5 logs at start-up that it was not compiled for the CPU's AVX2, AVX512F and FMA), so
steps/s are not comparable across versions: each is compared with its own `local`. A
ratio still depends on how fast that build computes (the slower its steps, the less an
exchange of the same bytes weighs); the last column, the time a local step takes beyond
`local`'s (1 / steps/s, of the medians), depends on it much less (only the exchange's own
kernels and copies run on that build). Contrib's exchange is a `tf.cond` whose branch has
ops on the ps, as `naive-easgd-P`'s, and with `rho=0` it still computes its elastic
penalty (times zero) and its gradient on every step; this package leaves the penalty out
when rho is 0."""
