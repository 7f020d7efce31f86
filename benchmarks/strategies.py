"""EASGD against what TF 2 teams pick today: PSS, MWMS, the callback and easgd-train.

    python -m benchmarks.strategies           # make bench-strategies: OUT/strategies.json, .log
    python -m benchmarks.strategies --quick   # a smoke run (under 5 min) in a temporary folder
    python -m benchmarks.strategies --rerender   # BENCHMARKS.md's block from the JSON

The same Keras model of easgd-train (its MLP and CNN) on the digits, 32 examples a worker
step, 2 workers: `ParameterServerStrategy` + `model.fit`, `MultiWorkerMirroredStrategy` +
`model.fit`, `ElasticAverageCallback` and `easgd-train --api=tf1` (strategies_jobs.py runs
them). Each contender's learning rate is picked on loopback from `LR_GRID` by its own
median time to 97 %; then every network trains each for a fixed time, repeats interleaved.
"""

import os
import pathlib
import re
import statistics
import tempfile

from absl import app

from benchmarks import strategies_jobs, strategies_report
from benchmarks.common import network, report
from benchmarks.common.harness import interleaved
from benchmarks.common.report import median_time, num
from benchmarks.strategies_report import TARGET

#: name: (kind, fixed options). `pss-spe` picks steps_per_execution from `SPE_GRID` too.
CONTENDERS = {
    "pss": ("pss", {"steps_per_execution": 1}),
    "pss-spe": ("pss", {}),
    "mwms": ("mwms", {}),
    # The callback at contrib's moving rate (0.9 / tau / W = 0.045, its default until the
    # figures here), at easgd-train's 0.9 / W = 0.45, and at 0.45 with overlap and bfloat16.
    "callback-a0.045": ("callback", {"moving_rate": 0.045}),
    "callback-a0.45": ("callback", {"moving_rate": 0.45}),
    "callback-a0.45-overlap-bf16": (
        "callback",
        {"moving_rate": 0.45, "overlap": True, "wire_dtype": "bfloat16"},
    ),
    "easgd-train": ("easgd-train", {}),
}
QUICK_CONTENDERS = ("pss", "mwms", "callback-a0.45", "easgd-train")
LR_GRID, QUICK_LR_GRID = (0.02, 0.05, 0.1), (0.05,)
SPE_GRID = (4, 16)
NETWORKS, QUICK_NETWORKS = ("loopback", "1gbit", "100mbit"), ("loopback", "1gbit")
MODELS, QUICK_MODELS = ("mlp", "cnn"), ("mlp",)
#: Seconds of training a run, evaluation every EVAL_SECS (PSS: every epoch of EPOCH_STEPS).
SECONDS, QUICK_SECONDS, EVAL_SECS, EPOCH_STEPS = 20.0, 6.0, 0.5, 48
REPEATS = 3
ERROR_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception): ")


def check_settings(contenders, networks, models, repeats, seconds):
    """Raises ValueError naming the argument unless every setting is one this section runs."""
    for name, value, allowed in (
        ("contenders", contenders, CONTENDERS),
        ("networks", networks, NETWORKS),
        ("models", models, MODELS),
    ):
        if not value or not set(value) <= set(allowed):
            raise ValueError(f"{name} must be a non-empty subset of {list(allowed)}, got {value!r}")
    if type(repeats) is not int or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"seconds must be a number > 0, got {seconds!r}")


def candidates(contender, lr_grid):
    """The settings a contender's pick tries: {"learning_rate"[, "steps_per_execution"]}."""
    if contender not in CONTENDERS:
        raise ValueError(f"contender must be one of {list(CONTENDERS)}, got {contender!r}")
    spes = SPE_GRID if contender == "pss-spe" else (None,)
    return [
        {"learning_rate": lr, **({"steps_per_execution": spe} if spe else {})}
        for spe in spes
        for lr in lr_grid
    ]


def pick(tried):
    """The settings of `tried` ([(settings, [seconds to 97 % or None])]) with the least
    median time (a run that never reached 97 % counts as infinitely slow); on a tie, the
    first. None when no settings reached it."""
    best, best_time = None, float("inf")
    for settings, times in tried:
        time = median_time(times)
        if time is not None and time < best_time:
            best, best_time = settings, time
    return best


def summary(run):
    """A run's figures: examples/s per worker, bytes per example on the ps's and worker 0's
    links (None on loopback without hosts), CPU ms of every process per 100 examples,
    seconds to 97 % and the final accuracy."""
    examples, moved = run["examples"], run["bytes"]

    def per_example(name):
        return moved[name] / examples if name in moved and examples else None

    curve, cpu = run["curve"], sum(run["cpu"].values())
    return {
        "cpu_ms": cpu * 1e5 / examples if run["cpu"] and examples else None,
        "examples_per_sec": statistics.fmean(run["rates"]) * strategies_jobs.BATCH
        if run["rates"]
        else 0.0,
        "ps_bytes": per_example("ps0"),
        "worker_bytes": per_example("worker0"),
        "time": report.first_time_at(curve, TARGET),
        "final": curve[-1][1] if curve else None,
    }


def one_run(kind, options, logs, rate, hosts, log, label):
    """Runs one job; returns its result with the load before it."""
    load = os.getloadavg()[0]
    with strategies_jobs.Job(kind, options, logs, hosts=hosts, rate=rate) as job:
        deadline = strategies_jobs.START_SECS + options["seconds"] + strategies_jobs.END_SECS
        result = job.run(deadline)
    result.update(load=load, options=options)
    figures = summary(result)
    log(
        f"  {label}: {figures['examples_per_sec']:.0f} examples/s a worker, 97 % after "
        f"{num(figures['time'])} s, final {num(figures['final'], 3)} (load {load:.1f})"
    )
    return result


def measure(results, log):
    """Picks each contender's settings on loopback, then runs every cell (module doc)."""
    quick = results["quick"]
    contenders = QUICK_CONTENDERS if quick else tuple(CONTENDERS)
    networks, models = (QUICK_NETWORKS, QUICK_MODELS) if quick else (NETWORKS, MODELS)
    repeats, seconds = (1, QUICK_SECONDS) if quick else (REPEATS, SECONDS)
    lr_grid = QUICK_LR_GRID if quick else LR_GRID
    check_settings(contenders, networks, models, repeats, seconds)
    reason = network.unavailable_reason(rate="1gbit")
    hosts = reason is None
    if not hosts:
        networks = ("loopback",)
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-strategies-logs-"))
    log(f"hosts: {reason or 'yes'}; process logs {logs}")
    results.update(
        contenders=contenders,
        networks=networks,
        models=models,
        repeats=repeats,
        seconds=seconds,
        lr_grid=lr_grid,
        spe_grid=SPE_GRID,
        eval_secs=EVAL_SECS,
        epoch_steps=EPOCH_STEPS,
        eval_every_steps=strategies_jobs.EVAL_EVERY_STEPS,
        hosts_skip_reason=reason,
        picks={},
        cells={},
        mwms_keras={},
        processes={c: strategies_jobs.processes(CONTENDERS[c][0]) for c in contenders},
    )
    base = {"eval_secs": EVAL_SECS, "epoch_steps": EPOCH_STEPS, "seconds": seconds}
    mwms = {"keras": "keras3"}
    counter = iter(range(10**6))

    def run(contender, model, settings, rate, label, retried=False):
        kind, fixed = CONTENDERS[contender]
        options = {**base, **fixed, **settings, "model": model}
        if kind == "mwms":
            options["keras"] = mwms["keras"]
        folder = logs / f"{next(counter):04d}-{contender}-{model}-{rate or 'loopback'}"
        try:
            return one_run(kind, options, folder, rate, hosts, log, label)
        except RuntimeError as error:
            if kind != "mwms" or mwms["keras"] != "keras3":
                if retried:
                    raise
                # One failed run (a gRPC abort, a process the machine starved) is run again
                # once, so that it does not end a two-hour run; its logs stay for a look.
                log(f"  {label}: failed ({error}); once more")
                results["failed_runs"] = [*results.get("failed_runs", []), [label, str(error)]]
                return run(contender, model, settings, rate, label, retried=True)
            # Keras 3 under MWMS: tried first, as the issue asks; tf-keras if it fails.
            results["mwms_keras"] = {"keras3_error": _last_error(folder), "failure": str(error)}
            log(f"  mwms with Keras 3 failed ({_last_error(folder)}): tf-keras from now on")
            mwms["keras"] = "tf-keras"
            return run(contender, model, settings, rate, label)

    for model in models:
        chosen_runs = _pick_all(results, model, contenders, lr_grid, run, log)
        results["cells"][model] = {}
        for rate_name in networks:
            rate = None if rate_name == "loopback" else rate_name
            cells = {contender: [] for contender in contenders}
            for repeat in range(repeats):
                for contender in interleaved(contenders, repeat):
                    if quick and rate is None:  # A smoke run reuses its picks' runs.
                        result = chosen_runs[contender]
                    else:
                        settings = results["picks"][model][contender]["chosen"]
                        label = f"{model} {rate_name} {contender} repeat {repeat}"
                        result = run(contender, model, settings, rate, label)
                    cells[contender].append(_cell_run(result))
            results["cells"][model][rate_name] = cells
    results["mwms_keras"]["used"] = mwms["keras"]


def _pick_all(results, model, contenders, lr_grid, run, log):
    """Each contender's settings for `model` by its own time to 97 % on loopback, the
    candidates of all interleaved, into results["picks"]; returns each one's chosen run."""
    tried = {contender: [] for contender in contenders}
    runs = {contender: [] for contender in contenders}
    grids = {contender: candidates(contender, lr_grid) for contender in contenders}
    for index in range(max(map(len, grids.values()))):
        for contender in interleaved(contenders, index):
            if index < len(grids[contender]):
                settings = grids[contender][index]
                result = run(
                    contender, model, settings, None, f"pick {model} {contender} {settings}"
                )
                tried[contender].append((settings, [summary(result)["time"]]))
                runs[contender].append(result)
    results["picks"][model], chosen_runs = {}, {}
    for contender in contenders:
        chosen = pick(tried[contender]) or tried[contender][0][0]
        results["picks"][model][contender] = {"tried": tried[contender], "chosen": chosen}
        chosen_runs[contender] = runs[contender][grids[contender].index(chosen)]
        log(f"{model} {contender}: picked {chosen}")
    return chosen_runs


def _cell_run(result):
    """What a cell keeps of a run."""
    keep = ("load", "cpu", "curve", "options")
    return dict(summary(result), **{key: result[key] for key in keep})


def last_error(text, limit=160):
    """The last line of a traceback's `text` that names an error ("ValueError: ..."),
    cut to `limit` characters, or ""."""
    lines = [line for line in text.splitlines() if ERROR_LINE.match(line)]
    return lines[-1][:limit] if lines else ""


def _last_error(folder):
    path = pathlib.Path(folder) / "worker0.err"
    return last_error(path.read_text()) if path.is_file() else ""


def main(argv):
    del argv
    report.drive(
        "benchmarks.strategies", "strategies", "BENCHMARKS.md", measure, strategies_report.write
    )


if __name__ == "__main__":
    # Here, not at import: the tests import this module beside others that define the same
    # absl flags (--report, --out).
    report.define_flags("strategies", "BENCHMARKS.md")
    app.run(main)
