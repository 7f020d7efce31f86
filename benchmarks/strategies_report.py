"""The strategies section's report: its rows, ratios and targets, and its block of
BENCHMARKS.md (between `strategies.BEGIN` and `END`; `make bench` keeps it).
"""

import statistics

from benchmarks import report, strategies
from benchmarks.report import median_time, num, table

HEADER = (
    "-network | -contender | -settings | examples/s a worker | x best TF | "
    "ps link B/example | worker link B/example | -s to 97% (each run) | median s | "
    "x best TF | final accuracy | load"
)
EASGD = ("callback", "callback-overlap-bf16", "easgd-train")


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def cell_figures(runs):
    """Medians of a cell's runs: {"examples_per_sec", "ps_bytes", "worker_bytes", "times",
    "time" (median, a run short of 97 % infinitely slow), "final", "load"}."""
    times = [run["time"] for run in runs]
    return {
        "examples_per_sec": median_or_none([r["examples_per_sec"] for r in runs]),
        "ps_bytes": median_or_none([r["ps_bytes"] for r in runs]),
        "worker_bytes": median_or_none([r["worker_bytes"] for r in runs]),
        "times": times,
        "time": median_time(times),
        "final": median_or_none([r["final"] for r in runs]),
        "load": median_or_none([r["load"] for r in runs]),
    }


def best_tf(figures):
    """(the TF strategies' best examples/s, their least median time to 97 %) of a network's
    {contender: figures}; None where no strategy has a figure."""
    rates = [
        figures[c]["examples_per_sec"]
        for c in strategies.TF_STRATEGIES
        if c in figures and figures[c]["examples_per_sec"] is not None
    ]
    times = [figures[c]["time"] for c in strategies.TF_STRATEGIES if c in figures]
    return max(rates, default=None), min((t for t in times if t is not None), default=None)


def ratio(value, base):
    return None if value is None or not base else value / base


def settings_text(settings):
    text = f"lr {settings['learning_rate']:g}"
    if "steps_per_execution" in settings:
        text += f", spe {settings['steps_per_execution']}"
    return text


def rows(results, model):
    """The table's rows of `model`, a network after another."""
    out = []
    for network, cells in results["cells"][model].items():
        figures = {contender: cell_figures(runs) for contender, runs in cells.items()}
        rate, time = best_tf(figures)
        for contender, f in figures.items():
            chosen = results["picks"][model][contender]["chosen"]
            each = ", ".join(num(t) for t in f["times"])
            out.append(
                [
                    network,
                    contender,
                    settings_text(chosen),
                    num(f["examples_per_sec"], 0),
                    num(ratio(f["examples_per_sec"], rate), 2),
                    num(f["ps_bytes"], 0),
                    num(f["worker_bytes"], 0),
                    each,
                    num(f["time"]),
                    num(ratio(f["time"], time), 2),
                    num(f["final"], 3),
                    num(f["load"]),
                ]
            )
    return out


def pick_rows(results, model):
    """Each contender's pick: every setting tried with its time to 97 %, and the choice."""
    out = []
    for contender, picked in results["picks"][model].items():
        tried = "; ".join(
            f"{settings_text(s)}: {num(median_time(t))} s" for s, t in picked["tried"]
        )
        out.append([contender, tried, settings_text(picked["chosen"])])
    return out


def targets(results):
    """(target, measured, met) rows: at each shaped link EASGD's best median time to 97 %
    <= 0.5 x the best TF strategy's, and its final accuracy within the cells' noise."""
    out = []
    for model, by_network in results["cells"].items():
        for network, cells in by_network.items():
            if network == "loopback":
                continue
            figures = {contender: cell_figures(runs) for contender, runs in cells.items()}
            _, tf_time = best_tf(figures)
            easgd = {c: figures[c]["time"] for c in EASGD if c in figures}
            times = [t for t in easgd.values() if t is not None]
            mine = min(times) if times else None
            met = None if tf_time is None else mine is not None and mine <= 0.5 * tf_time
            where = f"{model}, {network}"
            out.append(
                (
                    f"EASGD's best time to 97 % <= 0.5 x the best TF strategy's ({where})",
                    f"{report.seconds(mine)}; TF {report.seconds(tf_time)}",
                    met,
                )
            )
            finals = {c: [r["final"] for r in cells[c] if r["final"] is not None] for c in cells}
            tf_finals = [v for c in strategies.TF_STRATEGIES for v in finals.get(c, [])]
            mine_finals = [v for c in EASGD for v in finals.get(c, [])]
            if tf_finals and mine_finals:
                noise = max(max(tf_finals) - min(tf_finals), 1 / 355)  # One test image.
                gap = statistics.median(tf_finals) - statistics.median(mine_finals)
                out.append(
                    (
                        f"EASGD's final accuracy within the TF strategies' noise ({where})",
                        f"{statistics.median(mine_finals):.3f} against "
                        f"{statistics.median(tf_finals):.3f}",
                        gap <= noise,
                    )
                )
    return out


def processes_text(results):
    """One line per contender: its processes, their roles and cores."""
    lines = []
    for contender, names in results["processes"].items():
        each = ", ".join(f"`{name}` ({role}, cores {cpus})" for name, role, cpus in names)
        lines.append(f"- {contender}: {each}")
    return lines


def block(results):
    """The Markdown of the section, markers included."""
    status = {None: "skipped", True: "**met**", False: "**not met**"}
    keras = results.get("mwms_keras", {})
    mwms = "MWMS ran with " + ("Keras 3" if keras.get("used") == "keras3" else "tf-keras")
    if keras.get("keras3_error"):
        mwms += f": under Keras 3 its `fit` failed with `{keras['keras3_error']}`"
    out = [
        strategies.BEGIN,
        "",
        "## Against TF 2's strategies: PSS, MWMS, the callback, "
        "easgd-train (`benchmarks/strategies.py`, `make bench-strategies`)",
        "",
        *report.header(results, "make bench-strategies"),
        "",
        TEXT.format(
            seconds=results["seconds"],
            repeats=results["repeats"],
            grid=", ".join(f"{lr:g}" for lr in results["lr_grid"]),
            spe=", ".join(map(str, results["spe_grid"])),
            eval_secs=results["eval_secs"],
            epoch=results["epoch_steps"],
            every=results["eval_every_steps"],
        ),
        "",
        f"{mwms}.",
        "",
        "Processes (name, role, the cores it is pinned to):",
        "",
        *processes_text(results),
        "",
    ]
    if results.get("hosts_skip_reason"):
        out += [f"Shaped links skipped: {results['hosts_skip_reason']}.", ""]
    rows_of_targets = [(t, m, status[f]) for t, m, f in targets(results)]
    if rows_of_targets:
        out += [table("-target | -measured | -status", rows_of_targets), ""]
    for model in results["cells"]:
        out += [
            f"### {model}",
            "",
            table(HEADER, rows(results, model)),
            "",
            "Learning rates tried on loopback (median s to 97 %), and the pick:",
            "",
            table("-contender | -tried | -picked", pick_rows(results, model)),
            "",
        ]
    return "\n".join([*out, strategies.END]) + "\n"


def write(results, out, report_path):
    """Writes the section's block into `report_path`, keeping the rest of it."""
    del out  # No plots.
    report.write_generated_block(
        report_path, report_path, strategies.BEGIN, strategies.END, block(results)
    )


def kept_block(report_path):
    """The section's block in `report_path` as it is (run.py re-renders around it), or ""."""
    text = report_path.read_text() if report_path.is_file() else ""
    head, found, rest = text.partition(strategies.BEGIN)
    inside, found_end, _ = rest.partition(strategies.END)
    return f"{strategies.BEGIN}{inside}{strategies.END}\n" if found and found_end else ""


TEXT = """\
The same Keras model of easgd-train (`--model`) on the embedded digits, 32 examples a worker
step, 2 workers, momentum SGD (0.9): `pss` is `tf.distribute.ParameterServerStrategy` +
tf-keras `model.fit` (a coordinator, `DatasetCreator`, `steps_per_epoch` {epoch},
`GRPC_FAIL_FAST=use_caller`; every worker reads the whole training set in an order of its
own, as PSS's input pipeline gives no worker index); `pss-spe` the same with the best
`steps_per_execution` of {spe}; `mwms` is `tf.distribute.MultiWorkerMirroredStrategy` +
`model.fit` on the global batch; `callback` is `ElasticAverageCallback` with its defaults
(Keras 3), `callback-overlap-bf16` with `overlap=True, wire_dtype="bfloat16"`; `easgd-train`
is `easgd-train --api=tf1` with its defaults in task mode. Each run trains {seconds:g} s from
the moment its evaluating process begins (start-up not counted), {repeats} repeats
interleaved; medians. Learning rates from {grid}, each contender's picked on loopback by its
own time to 97 %. Accuracy: of the model (PSS: every epoch; MWMS: worker 0 every
{eval_secs:g} s) or of the centre (callback: every {eval_secs:g} s; easgd-train: every {every}
chief steps). Bytes: sent + received on the ps's and on worker 0's link over the whole job,
start-up included, per example trained. "x best TF": against the best of PSS and MWMS on the
same network. "loopback": each task a host of its own on unlimited links; load: the
1-minute load average before each run."""
