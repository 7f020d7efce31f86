"""Runs the benchmark suite and writes BENCHMARKS.md, results.json and the PNG plots.

    python -m benchmarks.run                # make bench: the full suite (~35 minutes)
    python -m benchmarks.run --quick        # make bench-quick: a smoke run under 3 minutes

Sections (see BENCHMARKS.md for what each measures and why):

1. throughput: steps/s per worker of every configuration on a 1 ps + 2 worker cluster of
   real processes, configurations interleaved, repeated in rounds.
2. bytes: loopback bytes per local step of one worker, in a private network namespace.
3. accuracy: wall time until the shared model reaches a test accuracy on the digits.
4. overhead: per-step time of the wrapped optimizer alone vs inside EASGD, fresh processes.

Everything a section starts, it stops: processes are killed and namespaces deleted when
the section ends, also on error or Ctrl-C.
"""

import importlib.metadata
import json
import os
import pathlib
import platform
import shlex
import statistics
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import report
from benchmarks import specs as models
from benchmarks.cluster import BenchCluster, netns_unavailable_reason, wall_time_in

flags.DEFINE_bool("quick", False, "Smoke run: fewer configurations, rounds and seconds.")
flags.DEFINE_string(
    "out",
    None,
    "Folder for results.json and the plots (default: benchmarks/results, or a "
    "temporary folder with --quick).",
)
flags.DEFINE_string("report", None, "Markdown report to write (default: OUT/BENCHMARKS.md).")
flags.DEFINE_list("sections", ["throughput", "bytes", "accuracy", "overhead"], "Sections to run.")
flags.DEFINE_integer("workers", 2, "Workers of the throughput and accuracy clusters.")
flags.DEFINE_integer("rounds", None, "Throughput rounds (default: 5, or 1 with --quick).")
flags.DEFINE_bool("tf2", None, "Also measure in TF 2 graph mode (default: not with --quick).")
FLAGS = flags.FLAGS

ROOT = pathlib.Path(__file__).resolve().parent.parent
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
ACCURACY_TARGET = 0.97
ACCURACY_LEARNING_RATE = 0.05
CALL_TIMEOUT_SECS = 300.0
#: Fresh processes the overhead section measures in, per world (blocks pooled).
OVERHEAD_PROCESSES = 3


def throughput(cluster, model, configs, rounds, seconds, warm_secs, log):
    """Steps/s per worker of each configuration, interleaved: round r runs every
    configuration once, in forward order on even rounds and backward on odd ones.

    Returns:
        {config: [{"round", "per_worker": [steps/s of each worker]}]}.
    """
    workers = list(range(cluster.num_workers))
    results = {config: [] for config in configs}
    for round_index in range(rounds):
        order = configs if round_index % 2 == 0 else tuple(reversed(configs))
        for config in order:
            container = _build(cluster, config, model, workers)
            answers = cluster.call_all(
                workers, "run", CALL_TIMEOUT_SECS, start_at=wall_time_in(warm_secs), seconds=seconds
            )
            _release(cluster, workers, container)
            rates = [answer["steps_per_sec"] for answer in answers]
            results[config].append({"round": round_index, "per_worker": rates})
            log(f"  {model} {config:>15} round {round_index}: {_fmt(rates)} steps/s")
    return results


def wire_bytes(cluster, model, configs, steps, warm_steps, log):
    """Loopback bytes per local step of worker 0 training alone, for each configuration."""
    results = {}
    for config in configs:
        container = _build(cluster, config, model, [0])
        answer = cluster.call(
            0, "count_bytes", CALL_TIMEOUT_SECS, warm_steps=warm_steps, steps=steps
        )
        _release(cluster, [0], container)
        results[config] = answer["lo_bytes"] / answer["steps"]
        log(f"  {config:>15}: {results[config] / 1e6:.3f} MB per local step")
    return results


def time_to_accuracy(cluster, configs, repeats, seconds, eval_every, log):
    """Learning curves of the shared model on the digits test split.

    Returns:
        {config: [{"curve": [(secs, accuracy, chief steps)], "steps": [per worker]}]}.
    """
    results = {config: [] for config, _ in configs}
    for repeat in range(repeats):
        for config, workers in configs:
            team = list(range(workers or cluster.num_workers))
            container = _build(
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
                start_at=wall_time_in(1.0),
                seconds=seconds,
                eval_every=eval_every,
            )
            _release(cluster, team, container)
            curve = answers[0]["curve"]
            results[config].append({"curve": curve, "steps": [a["steps"] for a in answers]})
            reached = report.first_time_at(curve, ACCURACY_TARGET)
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


def _build(cluster, config, model, workers, learning_rate=0.01):
    """Builds `config` on `workers`: worker 0 first (it initialises), then the others."""
    container = f"b{os.getpid()}x{next(_container_counter)}"
    arguments = {
        "config": config,
        "model": model,
        "num_workers": len(workers),
        "container": container,
        "learning_rate": learning_rate,
    }
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
    if config.startswith(("easgd-", "copy-easgd-")):
        return "remote_call" if config.endswith("-remotecall") else "direct"
    if config.startswith("naive-easgd-"):
        return "none"  # Its own exchange: ops on the ps inside a cond, no call.
    return None


def _release(cluster, workers, container):
    cluster.call_all(workers, "close", CALL_TIMEOUT_SECS)
    cluster.call(workers[0], "reset", CALL_TIMEOUT_SECS, containers=[container])


def _fmt(values):
    return " ".join(f"{v:6.1f}" for v in values)


def machine():
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        kb = int(pathlib.Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        tensorflow = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tensorflow = "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tensorflow,
    }


def main(argv):
    del argv  # Unused.
    quick = FLAGS.quick
    default_out = pathlib.Path(tempfile.gettempdir()) / "easgd-bench-quick"
    out = pathlib.Path(FLAGS.out or (default_out if quick else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    report_path = pathlib.Path(FLAGS.report) if FLAGS.report else out / "BENCHMARKS.md"
    rounds = FLAGS.rounds or (1 if quick else 5)
    with_tf2 = (not quick) if FLAGS.tf2 is None else FLAGS.tf2
    started = time.time()
    log_lines = []

    def log(message):
        line = f"[{time.time() - started:6.0f} s] {message}"
        print(line, flush=True)
        log_lines.append(line)

    netns_reason = netns_unavailable_reason()
    results = {
        "command": " ".join(
            shlex.quote(a) for a in ["python", "-m", "benchmarks.run", *sys.argv[1:]]
        ),
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
    log(f"load average {results['load_before']}; netns: {netns_reason or 'yes'}")
    sections = set(FLAGS.sections)
    configs = QUICK_CONFIGS if quick else FULL_CONFIGS
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-logs-"))
    log(f"process logs: {logs}")
    with BenchCluster(1, FLAGS.workers, "tf1", logs / "tf1", netns=netns_reason is None) as cl:
        log(f"cluster up: 1 ps + {FLAGS.workers} workers (tf1), netns {cl.netns}")
        if "throughput" in sections:
            results["throughput"] = {}
            model_list = [models.COMM_MLP] if quick else [models.COMM_MLP, models.COMPUTE_CNN]
            for spec in model_list:
                log(f"throughput: {spec.name}")
                results["throughput"][spec.name] = throughput(
                    cl,
                    spec.name,
                    configs,
                    rounds if spec is models.COMM_MLP else max(1, (rounds + 1) // 2),
                    seconds=3.0 if quick else 8.0,
                    warm_secs=1.5 if quick else 3.0,
                    log=log,
                )
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
                repeats=1 if quick else 3,
                seconds=10.0 if quick else 25.0,
                eval_every=0.5,
                log=log,
            )
    if with_tf2 and "throughput" in sections:
        with BenchCluster(1, FLAGS.workers, "tf2", logs / "tf2", netns=netns_reason is None) as cl:
            log(f"cluster up: 1 ps + {FLAGS.workers} workers (tf2)")
            results["throughput_tf2"] = {
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
    if "overhead" in sections:
        for world in ("tf1", "tf2") if with_tf2 else ("tf1",):
            log(f"overhead: no cluster, fresh processes ({world})")
            results.setdefault("overhead", {})[world] = per_step_overhead(
                world,
                [models.TINY_MLP.name] if quick else [s.name for s in models.OVERHEAD],
                processes=1 if quick else OVERHEAD_PROCESSES,
                blocks=6 if quick else 8,
                block_secs=0.25,
                log_dir=logs,
                log=log,
            )
    results["load_after"] = os.getloadavg()
    results["duration_secs"] = time.time() - started
    (out / "results.json").write_text(json.dumps(results, indent=1))
    (out / "run.log").write_text("\n".join(log_lines) + "\n")
    report.write(results, out, report_path)
    log(f"done in {results['duration_secs']:.0f} s: {report_path}, {out}/results.json, plots")


if __name__ == "__main__":
    app.run(main)
