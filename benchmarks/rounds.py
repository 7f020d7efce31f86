"""The measurements every section makes on a `harness.BenchCluster`, interleaved in rounds.

A configuration is built on the workers (`build_config`), measured, and released
(`release`); round r runs the configurations in forward order on even rounds and backward
on odd ones.
"""

import os
import threading
import time

from benchmarks import tables
from benchmarks.harness import wall_time_in

CALL_TIMEOUT_SECS = 300.0
ACCURACY_TARGET = 0.97
ACCURACY_LEARNING_RATE = 0.05
_containers = iter(range(1_000_000))


def interleaved(items, round_index):
    return items if round_index % 2 == 0 else tuple(reversed(items))


def build_config(cluster, config, model, workers, learning_rate=0.01, **extra):
    """Builds `config` on `workers`, worker 0 first (it initialises); checks that EASGD's
    exchanges go as the configuration says. Returns the resource container to release."""
    container = f"b{os.getpid()}x{next(_containers)}"
    arguments = {
        "config": config,
        "model": model,
        "num_workers": len(workers),
        "container": container,
        "learning_rate": learning_rate,
        **extra,
    }
    if "spec" in extra:  # contrib_task.py takes the model's spec and its batches' folder.
        del arguments["model"]
    answers = [cluster.call(workers[0], "build", CALL_TIMEOUT_SECS, **arguments)]
    answers += cluster.call_all(workers[1:], "build", CALL_TIMEOUT_SECS, **arguments)
    expected = None
    if config.startswith("naive-easgd-") or (config.startswith("easgd-") and "-overlap" in config):
        expected = "none"  # Its exchange: ops in a cond, or a queue runner's session.run.
    elif config.startswith(("easgd-", "copy-easgd-")):
        expected = "remote_call" if "-remotecall" in config else "direct"
    transports = [answer.get("transport") for answer in answers]
    if any(transport != expected for transport in transports):
        raise RuntimeError(f"{config}: exchange transports {transports}, expected {expected}")
    return container


def release(cluster, workers, container):
    """Closes the sessions of `workers` and resets `container`."""
    cluster.call_all(workers, "close", CALL_TIMEOUT_SECS)
    cluster.call(workers[0], "reset", CALL_TIMEOUT_SECS, containers=[container])


def timed_window(cluster, workers, seconds, warm_secs):
    """Steps/s of each of `workers` over a window of `seconds` they start together."""
    answers = cluster.call_all(
        workers, "run", CALL_TIMEOUT_SECS, start_at=wall_time_in(warm_secs), seconds=seconds
    )
    return {"per_worker": [answer["steps_per_sec"] for answer in answers]}, ""


def window_with_bytes(cluster, workers, seconds, warm_secs):
    """A window on a shaped network: each worker's steps over the time to its last step in
    the window, the bytes of the ps's link in it and each task's CPU share."""
    start_at, answers = wall_time_in(warm_secs), []
    runner = threading.Thread(
        daemon=True,
        target=lambda: answers.extend(
            cluster.call_all(workers, "run", CALL_TIMEOUT_SECS, start_at=start_at, seconds=seconds)
        ),
    )
    runner.start()
    tasks = [process.name for process in cluster.processes]
    time.sleep(max(0.0, start_at - time.time()))
    before, cpu = sum(cluster.link_bytes("ps0")), {t: cluster.cpu_seconds(t) for t in tasks}
    time.sleep(max(0.0, start_at + seconds - time.time()))
    after = sum(cluster.link_bytes("ps0"))
    cpu = {t: (cluster.cpu_seconds(t) - cpu[t]) / seconds for t in tasks}
    runner.join(CALL_TIMEOUT_SECS)
    if runner.is_alive() or len(answers) != len(workers):
        raise RuntimeError("the workers did not answer after their window")
    measured = {
        "per_worker": [a["steps"] / a["elapsed"] if a["elapsed"] > 0 else 0.0 for a in answers],
        "steps": [a["steps"] for a in answers],
        "ps_bytes": after - before,
        "seconds": seconds,
        "cpu_share": cpu,
    }
    return measured, f", {tables.link_bytes_per_step(measured) / 1e6:.2f} MB per step on the link"


def throughput(cluster, model, configs, rounds, seconds, warm_secs, log, measure=timed_window):
    """{config: [{"round", "per_worker": steps/s of each worker, ...`measure`'s}]}."""
    workers = list(range(cluster.num_workers))
    results = {config: [] for config in configs}
    for round_index in range(rounds):
        for config in interleaved(configs, round_index):
            container = build_config(cluster, config, model, workers)
            measured, note = measure(cluster, workers, seconds, warm_secs)
            release(cluster, workers, container)
            results[config].append({"round": round_index, **measured})
            rates = " ".join(f"{v:6.1f}" for v in measured["per_worker"])
            log(f"  {model} {config:>15} round {round_index}: {rates} steps/s{note}")
    return results


def time_to_accuracy(cluster, configs, repeats, seconds, eval_every, log, lead_secs=1.0):
    """Learning curves of the shared model on the digits, `configs` ((config, workers or
    None: all), ...) trained for `seconds` from `lead_secs` after the command.

    Returns:
        {config: [{"curve": [(secs, accuracy, chief steps)], "steps": [per worker]}]}.
    """
    results = {config: [] for config, _ in configs}
    for repeat in range(repeats):
        for config, workers in configs:
            team = list(range(workers or cluster.num_workers))
            container = build_config(
                cluster, config, "digits-mlp-2.2M", team, learning_rate=ACCURACY_LEARNING_RATE
            )
            answers = cluster.call_all(
                team,
                "train",
                CALL_TIMEOUT_SECS,
                seconds=seconds,
                start_at=wall_time_in(lead_secs),
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
