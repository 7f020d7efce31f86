"""The measurements of the benchmark suite on a `cluster.BenchCluster` (sections 1 to 4).

Each function builds a configuration on the cluster's workers (`build_config`), measures it
and releases it (`release`); `run.py` chooses the configurations, models and windows, and
`tuning.py` and `contrib_section.py` build theirs with the same helpers.
"""

import os
import statistics

from benchmarks import specs as models
from benchmarks import tables
from benchmarks.cluster import BenchCluster, wall_time_in

ACCURACY_TARGET = 0.97
ACCURACY_LEARNING_RATE = 0.05
CALL_TIMEOUT_SECS = 300.0


def throughput(cluster, model, configs, rounds, seconds, warm_secs, log, measure=None):
    """Steps/s per worker of each configuration, interleaved: round r runs every
    configuration once, in forward order on even rounds and backward on odd ones.

    Args:
        measure: measures one window, `(cluster, workers, seconds, warm_secs)` ->
            `(a dict with "per_worker", the rest of its log line)`; by default
            `timed_window`'s rates alone.

    Returns:
        {config: [{"round", "per_worker": [steps/s of each worker], ...what `measure`
        adds}]}.
    """
    measure = measure or _rates_only
    workers = list(range(cluster.num_workers))
    results = {config: [] for config in configs}
    for round_index in range(rounds):
        order = configs if round_index % 2 == 0 else tuple(reversed(configs))
        for config in order:
            container = build_config(cluster, config, model, workers)
            measured, note = measure(cluster, workers, seconds, warm_secs)
            release(cluster, workers, container)
            results[config].append({"round": round_index, **measured})
            rates = format_rates(measured["per_worker"])
            log(f"  {model} {config:>15} round {round_index}: {rates} steps/s{note}")
    return results


def timed_window(cluster, workers, seconds, warm_secs):
    """Steps/s of each of `workers` over a window of `seconds` they start together."""
    answers = cluster.call_all(
        workers, "run", CALL_TIMEOUT_SECS, start_at=wall_time_in(warm_secs), seconds=seconds
    )
    return [answer["steps_per_sec"] for answer in answers]


def _rates_only(cluster, workers, seconds, warm_secs):
    return {"per_worker": timed_window(cluster, workers, seconds, warm_secs)}, ""


def wire_bytes(cluster, model, configs, steps, warm_steps, log):
    """Loopback bytes per local step of worker 0 training alone, for each configuration."""
    results = {}
    for config in configs:
        container = build_config(cluster, config, model, [0])
        answer = cluster.call(
            0, "count_bytes", CALL_TIMEOUT_SECS, warm_steps=warm_steps, steps=steps
        )
        release(cluster, [0], container)
        results[config] = answer["lo_bytes"] / answer["steps"]
        log(f"  {config:>15}: {results[config] / 1e6:.3f} MB per local step")
    return results


def time_to_accuracy(cluster, configs, repeats, seconds, eval_every, log, lead_secs=1.0):
    """Learning curves of the shared model on the digits test split.

    The workers start training together `lead_secs` after the command (the Keras section
    gives its workers time to link to the centre first).

    Returns:
        {config: [{"curve": [(secs, accuracy, chief steps)], "steps": [per worker]}]}.
    """
    results = {config: [] for config, _ in configs}
    for repeat in range(repeats):
        for config, workers in configs:
            team = list(range(workers or cluster.num_workers))
            container = build_config(
                cluster,
                config,
                models.DIGITS_MLP.name,
                team,
                learning_rate=ACCURACY_LEARNING_RATE,
            )
            answers = cluster.call_all(
                team,
                "train",
                CALL_TIMEOUT_SECS,
                start_at=wall_time_in(lead_secs),
                seconds=seconds,
                eval_every=eval_every,
            )
            release(cluster, team, container)
            curve = answers[0]["curve"]
            results[config].append({"curve": curve, "steps": [a["steps"] for a in answers]})
            reached = tables.first_time_at(curve, ACCURACY_TARGET)
            log(
                f"  {config:>8} x{len(team)} repeat {repeat}: final {curve[-1][1]:.3f}, "
                f"{ACCURACY_TARGET} after {reached if reached is None else round(reached, 1)} s"
            )
    return results


def per_step_overhead(world, model_names, processes, blocks, block_secs, log_dir, log):
    """Per-step time of SGD vs EASGD on steps that do not exchange, in fresh processes.

    Each process is the worker of a cluster started for this measurement alone, so that
    nothing an earlier section ran in it weighs on the times. A process keeps an offset of
    its own (a few per cent on the tiny model, either way); the blocks of all the processes
    are pooled, so that the medians average those offsets out.

    Returns:
        Per model: the answer of each process, the pooled seconds per step of every block
        ("block_secs_per_step") and their medians ("median_secs_per_step").
    """
    answers = {model: [] for model in model_names}
    for index in range(processes):
        with BenchCluster(1, 1, world, log_dir / f"overhead-{world}-{index}") as cluster:
            for model in model_names:
                answers[model].append(
                    cluster.call(
                        0,
                        "overhead",
                        CALL_TIMEOUT_SECS,
                        model=model,
                        blocks=blocks,
                        block_secs=block_secs,
                    )
                )
    results = {}
    for model, per_process in answers.items():
        pooled = {
            key: [secs for answer in per_process for secs in answer["block_secs_per_step"][key]]
            for key in per_process[0]["block_secs_per_step"]  # sgd, easgd, cond (overhead.py)
        }
        medians = {key: statistics.median(values) for key, values in pooled.items()}
        results[model] = {
            "processes": per_process,
            "block_secs_per_step": pooled,
            "median_secs_per_step": medians,
        }
        log(
            f"  {model}: sgd {medians['sgd'] * 1e3:.3f} ms, easgd {medians['easgd'] * 1e3:.3f} ms"
            f" ({(medians['easgd'] / medians['sgd'] - 1) * 100:+.1f} %), cond "
            f"{medians['cond'] * 1e3:.3f} ms ({(medians['cond'] / medians['sgd'] - 1) * 100:+.1f}"
            f" %) per step, {len(per_process)} processes"
        )
    return results


_container_counter = iter(range(1_000_000))


def build_config(cluster, config, model, workers, learning_rate=0.01, **extra):
    """Builds `config` on `workers`: worker 0 first (it initialises), then the others.

    `extra` goes to the workers' build command too; contrib_task.py takes the model's spec
    and the folder of its batches instead of the model's name.
    """
    container = f"b{os.getpid()}x{next(_container_counter)}"
    arguments = {
        "config": config,
        "model": model,
        "num_workers": len(workers),
        "container": container,
        "learning_rate": learning_rate,
        **extra,
    }
    if "spec" in extra:
        del arguments["model"]
    answers = [cluster.call(workers[0], "build", CALL_TIMEOUT_SECS, **arguments)]
    if len(workers) > 1:
        answers += cluster.call_all(workers[1:], "build", CALL_TIMEOUT_SECS, **arguments)
    expected = _expected_transport(config)
    transports = [answer.get("transport") for answer in answers]
    if any(transport != expected for transport in transports):
        raise RuntimeError(f"{config}: exchange transports {transports}, expected {expected}")
    return container


def _expected_transport(config):
    """How the exchanges of `config` must go (graphs.py), or None for no EASGD optimizer."""
    if config.startswith("easgd-") and "-overlap" in config:
        return "none"  # Its exchange runs in a queue runner's own session.run: no call.
    if config.startswith(("easgd-", "copy-easgd-")):
        return "remote_call" if "-remotecall" in config else "direct"
    if config.startswith("naive-easgd-"):
        return "none"  # Its own exchange: ops on the ps inside a cond, no call.
    return None


def release(cluster, workers, container):
    """Closes the sessions of `workers` and resets `container` (`build_config`'s)."""
    cluster.call_all(workers, "close", CALL_TIMEOUT_SECS)
    cluster.call(workers[0], "reset", CALL_TIMEOUT_SECS, containers=[container])


def format_rates(values):
    """Steps/s of each worker, for the progress log."""
    return " ".join(f"{v:6.1f}" for v in values)
