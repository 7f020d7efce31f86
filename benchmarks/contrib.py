"""Section 1's side by side with the original `tf.contrib.opt.ElasticAverageOptimizer`.

Contrib runs on TensorFlow 1.15 (`.venv-tf115`, made by `make test-contrib`) in a cluster of
common/contrib_task.py, this package in one of common/task.py; both stay up and the
configurations interleave while the other cluster idles. Before every window each worker's
variables, batch and loss must match the first build's (`SessionWorker.fingerprint`). Steps/s
are compared within each TensorFlow version (different builds), as ratios.
"""

import os
import pathlib
import statistics
import time

import numpy as np

from benchmarks.common import protocol
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

#: (side, configuration) in a round's order; "contrib": TF 1.15, "package": this one.
RUNS = (("contrib", "local"), ("contrib", "contrib-easgd-10"), ("package", "local"),
        ("package", "easgd-10"))  # fmt: skip
LOSS_RTOL = 1e-4  # The two builds' losses on the same values may differ in their last bits.


def measure(results, python, workers, quick, netns, logs, log):
    """{"run": its own provenance, then "skipped" or "runs", "fingerprints", "versions"...}."""
    started, section = time.time(), {"run": own_run(results)}
    python = pathlib.Path(python or ROOT / ".venv-tf115" / "bin" / "python")
    if not (python.is_file() and os.access(python, os.X_OK)):
        section["skipped"] = "no Python of TensorFlow 1.15 (`make test-contrib` builds .venv-tf115)"
        log(f"contrib: SKIPPED, {python} not found")
        return section
    spec, team = protocol.COMM_MLP, list(range(workers))
    rounds, seconds, warm_secs = (1, 3.0, 1.5) if quick else (5, 8.0, 3.0)
    theirs = BenchCluster(workers, logs / "contrib-tf115", netns=netns, python=python,
                          module="benchmarks.common.contrib_task")  # fmt: skip
    with theirs, BenchCluster(workers, logs / "contrib-package", netns=netns) as ours:
        clusters = {"contrib": theirs, "package": ours}
        versions = {key: theirs.ready["worker0"][key] for key in ("tensorflow", "python")}
        log(f"contrib: clusters up, TensorFlow {versions['tensorflow']} and this one")
        for index in team:  # contrib_task.py reads them: numpy 1.18 draws other values.
            images, labels = protocol.synthetic_batch(spec, seed=index)
            np.savez(logs / f"{spec.name}-worker{index}.npz", images=images, labels=labels)
        extra = {"contrib": {"batch_dir": str(logs)}, "package": {}}
        runs, prints, reference = {"contrib": {}, "package": {}}, {}, None
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
                idle_before, window_start = idle.stat()[0], time.monotonic()
                measured, _ = timed_window(cluster, team, seconds, warm_secs)
                idle_cpu += idle.stat()[0] - idle_before
                window_secs += time.monotonic() - window_start
                cluster.release(team, container)
                runs[side].setdefault(config, []).append({"round": round_index, **measured})
                rates = " ".join(f"{rate:6.1f}" for rate in measured["per_worker"])
                log(f"  {side:>7} {config:>16} round {round_index}: {rates} steps/s")
    ours = {k: results["machine"][k] for k in ("tensorflow", "python")}
    section.update(runs=runs, fingerprints=prints, idle_cpu_per_sec=idle_cpu / window_secs,
                   model=spec.name, versions={"contrib": versions, "package": ours},
                   rounds=rounds, seconds=seconds, warm_secs=warm_secs)  # fmt: skip
    section["run"].update(load_after=os.getloadavg(), duration_secs=time.time() - started)
    return section


def _check(found, reference, what):
    """Raises unless each worker's digests equal the reference's and its loss is close."""
    for index, (mine, first) in enumerate(zip(found, reference, strict=True)):
        same = all(mine[key] == first[key] for key in ("params", "batch", "variables"))
        if not same or abs(mine["loss"] - first["loss"]) > LOSS_RTOL * abs(first["loss"]):
            raise RuntimeError(
                f"{what}, worker {index}: not the first build's start: {mine} vs {first}"
            )


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
    """The side by side's lines, within section 1."""
    section = results["contrib"]
    made = made_by(results, "contrib", "contrib")
    out = ["### Side by side with contrib on TensorFlow 1.15", "", made, ""]
    if "skipped" in section:
        return [*out, f"Skipped: {section['skipped']}.", ""]
    run, versions, rows = section["run"], section["versions"], []
    for side, config in RUNS:
        by_config = section["runs"].get(side, {})
        if config in by_config:
            median, base = (statistics.median(per_round(by_config[c])) for c in (config, "local"))
            ratio = num(per_round_ratio(by_config, config, "local"), 2)
            rows.append(f"{versions[side]['tensorflow']} ({side}) | {config} | {median:.1f} | "
                        f"{ratio} | {(1 / median - 1 / base) * 1e3:+.1f}")  # fmt: skip
    header = "-TensorFlow | -configuration | steps/s | x local (per round) | ms a step over local"
    where = where_measured(run, results)
    text = f"{section['model']}, each side against its own `local`, {where}; same variables, "
    text += "batch and loss on both sides, checked before every window."
    ratios = ratio_of_ratios(section)
    if ratios:
        text += " Ratio of ratios (ours / contrib's): **{:.2f}** (medians), {:.2f} (per round)."
        text = text.format(*ratios)
    return [*out, text, "", table(header, rows), ""]
