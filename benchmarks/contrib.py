"""Section 1's side by side with the original `tf.contrib.opt.ElasticAverageOptimizer`.

Contrib runs on TensorFlow 1.15 (`.venv-tf115`, made by `make test-contrib`) in a cluster of
common/contrib_task.py, this package in one of common/task.py; both stay up and the
configurations interleave while the other cluster idles. Before every window each worker's
variables, batch and loss must match the first build's (`SessionWorker.fingerprint`). Steps/s
are compared within each TensorFlow version (different builds), as ratios: with 1 ps on
loopback, then with 2 ps tasks, every task a host of its own on a 1 Gbit/s link, the
variables spread over both by `replica_device_setter` alike on both sides (checked).
"""

import os
import pathlib
import statistics
import time

import numpy as np

from benchmarks.common import network, protocol
from benchmarks.common.harness import BenchCluster, interleaved, timed_window
from benchmarks.common.report import (
    ROOT,
    made_by,
    num,
    own_run,
    per_round,
    per_round_ratio,
    table,
    where_measured,
)
from benchmarks.shaped import rate_text

#: (side, configuration) in a round's order; "contrib": TF 1.15, "package": this one.
RUNS = (("contrib", "local"), ("contrib", "contrib-easgd-10"), ("package", "local"),
        ("package", "easgd-10"))  # fmt: skip
LOSS_RTOL = 1e-4  # The two builds' losses on the same values may differ in their last bits.
#: The second measurement: this many ps tasks, every task a host whose link has this rate.
SPREAD_PS, SPREAD_RATE = 2, "1gbit"


def measure(results, python, workers, quick, netns, logs, log):
    """{"run": its own provenance, then "skipped" or "runs", "fingerprints", "versions"...
    of 1 ps on loopback, and "two_ps": {"num_ps", "rate", "runs", "fingerprints",
    "placement", ...} of SPREAD_PS ps tasks at SPREAD_RATE, or {"skipped": why not}}."""
    started, section = time.time(), {"run": own_run(results)}
    python = pathlib.Path(python or ROOT / ".venv-tf115" / "bin" / "python")
    if not (python.is_file() and os.access(python, os.X_OK)):
        section["skipped"] = "no Python of TensorFlow 1.15 (`make test-contrib` builds .venv-tf115)"
        log(f"contrib: SKIPPED, {python} not found")
        return section
    spec, team = protocol.COMM_MLP, list(range(workers))
    window = (1, 3.0, 1.5) if quick else (5, 8.0, 3.0)
    for index in team:  # contrib_task.py reads them: numpy 1.18 draws other values.
        images, labels = protocol.synthetic_batch(spec, seed=index)
        np.savez(logs / f"{spec.name}-worker{index}.npz", images=images, labels=labels)
    measured = _side_by_side(python, spec, team, window, logs, "contrib", log, netns=netns)
    ours = {k: results["machine"][k] for k in ("tensorflow", "python")}
    measured["versions"] = {"contrib": measured["versions"], "package": ours}
    section.update(measured, model=spec.name, rounds=window[0], seconds=window[1],
                   warm_secs=window[2])  # fmt: skip
    reason = network.unavailable_reason(rate=SPREAD_RATE)
    if reason is None:
        where = {"num_ps": SPREAD_PS, "rate": SPREAD_RATE}
        spread = _side_by_side(python, spec, team, window, logs, "contrib-2ps", log, **where)
        del spread["versions"]  # The same Pythons as above.
        section["two_ps"] = {**where, **spread}
    else:
        section["two_ps"] = {"skipped": reason}
        log(f"contrib, {SPREAD_PS} ps at {SPREAD_RATE}: SKIPPED, {reason}")
    section["run"].update(load_after=os.getloadavg(), duration_secs=time.time() - started)
    return section


def _side_by_side(python, spec, team, window, logs, name, log, **where):
    """Both sides' clusters (`where`: BenchCluster's netns, or num_ps and rate; their
    process logs in `logs`/`name`-tf115 and -package, the batches in `logs`), RUNS
    interleaved over `window`'s rounds: {"runs",
    "fingerprints", "idle_cpu_per_sec", "versions" (contrib's), and with several ps tasks
    "placement": {side: {variable: ps task}}, checked alike on both sides}."""
    rounds, seconds, warm_secs = window
    theirs = BenchCluster(len(team), logs / f"{name}-tf115", python=python,
                          module="benchmarks.common.contrib_task", **where)  # fmt: skip
    with theirs, BenchCluster(len(team), logs / f"{name}-package", **where) as ours:
        clusters = {"contrib": theirs, "package": ours}
        versions = {key: theirs.ready["worker0"][key] for key in ("tensorflow", "python")}
        links = f", a host each at {where['rate']}" if where.get("rate") else ""
        log(f"{name}: clusters up, {ours.num_ps} ps + {len(team)} workers{links}, TensorFlow "
            f"{versions['tensorflow']} and this one")  # fmt: skip
        extra = {"contrib": {"batch_dir": str(logs)}, "package": {}}
        runs, prints, placements, reference = {"contrib": {}, "package": {}}, {}, {}, None
        idle_cpu = window_secs = 0.0
        for round_index in range(rounds):
            for side, config in interleaved(RUNS, round_index):
                cluster = clusters[side]
                idle = clusters["package" if side == "contrib" else "contrib"]
                container = cluster.build(config, spec.name, team, **extra[side])
                found = cluster.call(team, "fingerprint")
                reference = reference or found
                _check(found, reference, f"{side} {config}")
                prints.setdefault(side, {}).setdefault(config, found)
                if cluster.num_ps > 1 and config != "local":
                    placements[side] = cluster.call(team[:1], "placement")[0]["placement"]
                    check_spread(placements, cluster.num_ps)
                idle_before, window_start = idle.stat()[0], time.monotonic()
                measured, _ = timed_window(cluster, team, seconds, warm_secs)
                idle_cpu += idle.stat()[0] - idle_before
                window_secs += time.monotonic() - window_start
                cluster.release(team, container)
                runs[side].setdefault(config, []).append({"round": round_index, **measured})
                rates = " ".join(f"{rate:6.1f}" for rate in measured["per_worker"])
                log(f"  {side:>7} {config:>16} round {round_index}: {rates} steps/s")
    measured = {"runs": runs, "fingerprints": prints, "idle_cpu_per_sec": idle_cpu / window_secs,
                "versions": versions}  # fmt: skip
    return {**measured, "placement": placements} if placements else measured


def _check(found, reference, what):
    """Raises unless each worker's digests equal the reference's and its loss is close."""
    for index, (mine, first) in enumerate(zip(found, reference, strict=True)):
        same = all(mine[key] == first[key] for key in ("params", "batch", "variables"))
        if not same or abs(mine["loss"] - first["loss"]) > LOSS_RTOL * abs(first["loss"]):
            raise RuntimeError(
                f"{what}, worker {index}: not the first build's start: {mine} vs {first}"
            )


def check_spread(placements, num_ps):
    """Raises RuntimeError unless each side's `placements` ({side: {variable: ps task}})
    use every one of the `num_ps` tasks and both sides place the same variables alike."""
    for side, placed in placements.items():
        if set(placed.values()) != set(range(num_ps)):
            raise RuntimeError(f"{side}: variables on ps tasks {set(placed.values())}, not on "
                               f"each of the {num_ps}: {placed}")  # fmt: skip
    if len({tuple(sorted(placed.items())) for placed in placements.values()}) > 1:
        raise RuntimeError(f"the sides spread the variables differently: {placements}")


def parameters_per_task(placement, spec):
    """{ps task: parameters of `spec` (a protocol.ModelSpec) whose centres it holds}, in
    task order, of one side's `placement` ({variable: ps task}; a centre is named
    <scope>/<the model's variable>; other variables, such as global_step, are not counted)."""
    shapes, counts = spec.shapes(), {}
    for name, task in sorted(placement.items(), key=lambda item: item[1]):
        shape = shapes.get(name.partition("/")[2])
        counts[task] = counts.get(task, 0) + (0 if shape is None else int(np.prod(shape)))
    return counts


def ratio_of_ratios(section):
    """(easgd-10 / local here) / (contrib-easgd-10 / local on 1.15): of the medians, and
    the median over rounds; None when a configuration is missing."""
    pairs = (("package", "easgd-10"), ("package", "local"), ("contrib", "contrib-easgd-10"),
             ("contrib", "local"))  # fmt: skip
    try:
        series = [per_round(section["runs"][side][config]) for side, config in pairs]
    except KeyError:
        return None
    a, b, c, d = (statistics.median(s) for s in series)
    in_rounds = statistics.median((a / b) / (c / d) for a, b, c, d in zip(*series, strict=True))
    return (a / b) / (c / d), in_rounds


def render(results):
    """The side by side's lines, within section 1: the table of 1 ps, then that of
    SPREAD_PS ps tasks (results measured before it had none: nothing of it)."""
    section = results["contrib"]
    made = made_by(results, "contrib", "contrib")
    out = ["### Side by side with contrib on TensorFlow 1.15", "", made, ""]
    if "skipped" in section:
        return [*out, f"Skipped: {section['skipped']}.", ""]
    run, versions = section["run"], section["versions"]
    where = where_measured(run, results)
    text = f"{section['model']}, each side against its own `local`, {where}; same variables, "
    text += "batch and loss on both sides, checked before every window."
    out += [text + _ratios_text(section), "", table(HEADER, _rows(section, versions)), ""]
    spread = section.get("two_ps")
    if spread is None:
        return out
    if "skipped" in spread:
        what = f"{SPREAD_PS} ps tasks, every task a host on a {rate_text(SPREAD_RATE)} link"
        return [*out, f"{what}: skipped, {spread['skipped']}.", ""]
    counts = parameters_per_task(spread["placement"]["package"], protocol.MODELS[section["model"]])
    held = ", ".join(f"ps{task} {_count(n)}" for task, n in counts.items())
    text = SPREAD.format(num_ps=spread["num_ps"], rate=rate_text(spread["rate"]), held=held)
    return [*out, text + _ratios_text(spread), "", table(HEADER, _rows(spread, versions)), ""]


def _rows(measured, versions):
    """The table's rows of one measurement's "runs", in RUNS's order."""
    rows = []
    for side, config in RUNS:
        by_config = measured["runs"].get(side, {})
        if config in by_config:
            median, base = (statistics.median(per_round(by_config[c])) for c in (config, "local"))
            ratio = num(per_round_ratio(by_config, config, "local"), 2)
            rows.append(f"{versions[side]['tensorflow']} ({side}) | {config} | {median:.1f} | "
                        f"{ratio} | {(1 / median - 1 / base) * 1e3:+.1f}")  # fmt: skip
    return rows


def _ratios_text(measured):
    ratios = ratio_of_ratios(measured)
    if ratios is None:
        return ""
    return " Ratio of ratios (ours / contrib's): **{:.2f}** (medians), {:.2f} (per round).".format(
        *ratios
    )


def _count(parameters):
    """A parameter count as 2.91 M, 3.1 K or 10."""
    if parameters >= 1e6:
        return f"{parameters / 1e6:.2f} M"
    return f"{parameters / 1e3:.1f} K" if parameters >= 1e3 else str(parameters)


HEADER = "-TensorFlow | -configuration | steps/s | x local (per round) | ms a step over local"
SPREAD = """\
**{num_ps} ps tasks, every task a host of its own on a {rate} link** (`tc`), else as above.
`replica_device_setter` spreads the variables over the ps tasks, each to the task holding
the fewest bytes so far (`models.FewestBytesFirst`), alike on both sides (checked before the
windows); the parameters whose centres each holds: {held}. Ours
exchanges by direct calls (easgd-10's normal path, checked), which go to the ps tasks at
once; contrib's exchange is one graph whose ops on each ps task run together."""
