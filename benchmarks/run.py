"""Runs the benchmark suite and writes BENCHMARKS.md, results.json and the PNG plots.

    python -m benchmarks.run                # make bench: the full suite (~40 minutes)
    python -m benchmarks.run --quick        # make bench-quick: a smoke run under 3 minutes
    python -m benchmarks.run --sections=contrib --merge   # make bench-contrib (~5 minutes)

Sections (see BENCHMARKS.md for what each measures and why):

1. throughput: steps/s per worker of every configuration on a 1 ps + 2 worker cluster of
   real processes, configurations interleaved, repeated in rounds.
2. bytes: loopback bytes per local step of one worker, in a private network namespace.
3. accuracy: wall time until the shared model reaches a test accuracy on the digits.
4. overhead: per-step time of the wrapped optimizer alone vs inside EASGD, fresh processes.
contrib (shown in section 1): the throughput of section 1 side by side with the original
   `tf.contrib.opt.ElasticAverageOptimizer` on TensorFlow 1.15 (`.venv-tf115`, made by
   `make test-contrib`), as ratios within each TensorFlow version; skipped without it.
   With --merge, the other sections of OUT/results.json are kept (the report says which
   run measured what).

Everything a section starts, it stops: processes are killed and namespaces deleted when
the section ends, also on error or Ctrl-C.
"""

import contextlib
import importlib.metadata
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
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
SECTIONS = ("throughput", "bytes", "accuracy", "overhead", "contrib")
flags.DEFINE_list("sections", list(SECTIONS), f"Sections to run, of {', '.join(SECTIONS)}.")
flags.register_validator(
    "sections", lambda names: set(names) <= set(SECTIONS), f"Sections are {', '.join(SECTIONS)}."
)
flags.DEFINE_integer("workers", 2, "Workers of the throughput and accuracy clusters.")
flags.DEFINE_integer("rounds", None, "Throughput rounds (default: 5, or 1 with --quick).")
flags.DEFINE_bool("tf2", None, "Also measure in TF 2 graph mode (default: not with --quick).")
flags.DEFINE_string(
    "contrib_python",
    None,
    "Python of TensorFlow 1.15 with tf.contrib, for the contrib section (default: "
    ".venv-tf115/bin/python of the checkout, which `make test-contrib` builds).",
)
flags.DEFINE_bool(
    "merge",
    False,
    "With --sections=contrib: keep the other sections of OUT/results.json, a saved run, "
    "and re-render the report with them.",
)
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
#: The contrib section's (side, configuration) pairs, in a round's order: the "contrib" side
#: is a cluster of contrib_task.py under TensorFlow 1.15's Python, the "package" side one of
#: task.py under this Python's TensorFlow, in TF1 mode (ref variables, as contrib's).
CONTRIB_RUNS = (
    ("contrib", "local"),
    ("contrib", "contrib-easgd-10"),
    ("package", "local"),
    ("package", "easgd-10"),
)
CONTRIB_ROUNDS = 5
#: The two builds' losses on the same values may differ in their last bits (other kernels).
CONTRIB_LOSS_RTOL = 1e-4


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
            rates = _timed_window(cluster, workers, seconds, warm_secs)
            _release(cluster, workers, container)
            results[config].append({"round": round_index, "per_worker": rates})
            log(f"  {model} {config:>15} round {round_index}: {_fmt(rates)} steps/s")
    return results


def _timed_window(cluster, workers, seconds, warm_secs):
    """Steps/s of each of `workers` over a window of `seconds` they start together."""
    answers = cluster.call_all(
        workers, "run", CALL_TIMEOUT_SECS, start_at=wall_time_in(warm_secs), seconds=seconds
    )
    return [answer["steps_per_sec"] for answer in answers]


def contrib_unavailable_reason(python):
    """Why TensorFlow 1.15 with contrib cannot run from `python`, or None if it can."""
    if not (python.is_file() and os.access(python, os.X_OK)):
        return (
            f"{python} not found: `make test-contrib` builds .venv-tf115 (TensorFlow 1.15.5 "
            "with tf.contrib; it needs a Python 3.7)"
        )
    return None


def contrib_side_by_side(clusters, spec, rounds, seconds, warm_secs, batch_dir, log):
    """Throughput of `CONTRIB_RUNS`, interleaved as `throughput` does, on two clusters.

    Both clusters stay up for the whole section; a configuration runs on its side's cluster
    while the other cluster's processes wait idle (the CPU time they take meanwhile is
    measured). Before the window of every build, each
    worker's fingerprint (models_py37.fingerprint) is compared with the first of its index:
    the two TensorFlow versions must train the same model from the same values on the same
    batch.

    Args:
        clusters: {"contrib": BenchCluster of contrib_task.py, "package": of task.py}.
        spec: the `specs.ModelSpec` measured.
        rounds: interleaved rounds.
        seconds: the measured window.
        warm_secs: the warm-up before it.
        batch_dir: folder for the workers' batches (contrib_task.py reads them there).
        log: progress logger.

    Returns:
        {"runs": {side: {config: [{"round", "per_worker"}]}}, "fingerprints": {side:
        {config: the first build's fingerprint of each worker}}, "idle_cpu_per_sec": CPU
        seconds the waiting cluster used per second of the other's windows}.
    """
    workers = list(range(clusters["package"].num_workers))
    for index in workers:
        _save_batch(batch_dir / f"{spec.name}-worker{index}.npz", spec, index)
    extra = {
        "contrib": {"spec": spec.as_json(), "batch_dir": str(batch_dir)},
        "package": {},
    }
    runs = {side: {} for side, _ in CONTRIB_RUNS}
    fingerprints = {side: {} for side, _ in CONTRIB_RUNS}
    reference = None
    idle_cpu = window_secs = 0.0
    for round_index in range(rounds):
        order = CONTRIB_RUNS if round_index % 2 == 0 else tuple(reversed(CONTRIB_RUNS))
        for side, config in order:
            cluster = clusters[side]
            (idle,) = (other for name, other in clusters.items() if name != side)
            container = _build(cluster, config, spec.name, workers, **extra[side])
            prints = cluster.call_all(workers, "fingerprint", CALL_TIMEOUT_SECS)
            reference = reference or prints
            _check_fingerprints(prints, reference, f"{side} {config}")
            fingerprints[side].setdefault(config, prints)
            idle_before, started = idle.cpu_seconds(), time.monotonic()
            rates = _timed_window(cluster, workers, seconds, warm_secs)
            idle_cpu += idle.cpu_seconds() - idle_before
            window_secs += time.monotonic() - started
            _release(cluster, workers, container)
            runs[side].setdefault(config, []).append({"round": round_index, "per_worker": rates})
            log(f"  {side:>7} {config:>16} round {round_index}: {_fmt(rates)} steps/s")
    return {
        "runs": runs,
        "fingerprints": fingerprints,
        "idle_cpu_per_sec": idle_cpu / window_secs,
    }


def _save_batch(path, spec, index):
    """Writes worker `index`'s batch of `spec`, as task.py draws it, for models_py37.py."""
    images, labels = models.synthetic_batch(spec, seed=index)
    np.savez(path, images=images, labels=labels)  # .npy format 1.0: numpy 1.18 reads it.


def _check_fingerprints(prints, reference, what):
    """Raises unless each worker's digests equal the reference's and its loss is close."""
    for index, (mine, first) in enumerate(zip(prints, reference, strict=True)):
        same = all(mine[key] == first[key] for key in ("params", "batch", "variables"))
        close = abs(mine["loss"] - first["loss"]) <= CONTRIB_LOSS_RTOL * abs(first["loss"])
        if not (same and close):
            raise RuntimeError(
                f"{what}, worker {index}: not the model, values or batch of the first build: "
                f"{mine} vs {first}"
            )


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


def _build(cluster, config, model, workers, learning_rate=0.01, **extra):
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


def contrib_section(results, rounds, seconds, warm_secs, netns, log_dir, log):
    """The contrib section: its own provenance, and `contrib_side_by_side`'s figures.

    Args:
        results: this run's results so far (command, revision, machine).
        rounds: interleaved rounds.
        seconds: the measured window.
        warm_secs: the warm-up before it.
        netns: whether each cluster gets a private network namespace.
        log_dir: folder of the processes' logs.
        log: progress logger.

    Returns:
        A dict: "run" (command, revision, date, load averages, duration: the section may
        be merged into the results of another run), and either "skipped" (why) or the
        figures ("runs", "fingerprints"), the versions of each side and the set-up.
    """
    started = time.time()
    section = {
        "run": {
            "command": results["command"],
            "revision": results["revision"],
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "quick": results["quick"],
            "load_before": os.getloadavg(),
        }
    }
    python = pathlib.Path(FLAGS.contrib_python or ROOT / ".venv-tf115" / "bin" / "python")
    reason = contrib_unavailable_reason(python)
    if reason:
        log(f"contrib: SKIPPED, {reason}")
        section["skipped"] = reason
        return section
    spec = models.COMM_MLP
    log(f"contrib: {spec.name}, TensorFlow 1.15 with contrib ({python}) and this TensorFlow")
    with (
        BenchCluster(
            1,
            FLAGS.workers,
            "tf1",
            log_dir / "contrib-tf115",
            netns=netns,
            python=python,
            module="benchmarks.contrib_task",
        ) as theirs,
        BenchCluster(1, FLAGS.workers, "tf1", log_dir / "contrib-package", netns=netns) as ours,
    ):
        versions = {key: theirs.ready["worker0"][key] for key in ("tensorflow", "python")}
        log(
            f"clusters up: 1 ps + {FLAGS.workers} workers each, TensorFlow "
            f"{versions['tensorflow']} (Python {versions['python']}) and "
            f"{results['machine']['tensorflow']} (tf1), netns {theirs.netns}, {ours.netns}"
        )
        measured = contrib_side_by_side(
            {"contrib": theirs, "package": ours}, spec, rounds, seconds, warm_secs, log_dir, log
        )
    section.update(measured)
    section.update(
        {
            "model": spec.name,
            "versions": {
                "contrib": versions,
                "package": {
                    "tensorflow": results["machine"]["tensorflow"],
                    "python": results["machine"]["python"],
                },
            },
            "rounds": rounds,
            "seconds": seconds,
            "warm_secs": warm_secs,
        }
    )
    section["run"]["load_after"] = os.getloadavg()
    section["run"]["duration_secs"] = time.time() - started
    log(f"contrib: done in {section['run']['duration_secs']:.0f} s")
    return section


def source_revision():
    """The checkout's commit, and the files of the benchmarked code that differ from it."""
    try:
        head = _git("rev-parse", "--short", "HEAD").strip()
        status = _git(
            "status",
            "--porcelain",
            "--",
            "benchmarks",
            ":!benchmarks/results",
            "tf_contrib_easgd",
            "setup.py",
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "changed": []}
    return {"commit": head, "changed": sorted(line[3:] for line in status.splitlines())}


def _git(*arguments):
    return subprocess.run(
        ["git", *arguments], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    ).stdout


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

    sections = set(FLAGS.sections)
    if FLAGS.merge and sections != {"contrib"}:
        raise app.UsageError("--merge takes --sections=contrib only")
    netns_reason = netns_unavailable_reason()
    results = {
        "command": " ".join(
            shlex.quote(a) for a in ["python", "-m", "benchmarks.run", *sys.argv[1:]]
        ),
        "revision": source_revision(),
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
    saved = None
    if FLAGS.merge:
        saved = json.loads((out / "results.json").read_text())
        log(f"merging into {out / 'results.json'} (run of {saved['date']})")
    configs = QUICK_CONFIGS if quick else FULL_CONFIGS
    logs = pathlib.Path(tempfile.mkdtemp(prefix="easgd-bench-logs-"))
    log(f"process logs: {logs}")
    tf1_cluster = (
        BenchCluster(1, FLAGS.workers, "tf1", logs / "tf1", netns=netns_reason is None)
        if sections & {"throughput", "bytes", "accuracy"}
        else contextlib.nullcontext()
    )
    with tf1_cluster as cl:
        if cl is not None:
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
    if "contrib" in sections:
        results["contrib"] = contrib_section(
            results,
            rounds=FLAGS.rounds or (1 if quick else CONTRIB_ROUNDS),
            seconds=3.0 if quick else 8.0,
            warm_secs=1.5 if quick else 3.0,
            netns=netns_reason is None,
            log_dir=logs,
            log=log,
        )
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
    results["duration_secs"] = duration = time.time() - started
    if saved is not None:
        saved["contrib"] = results["contrib"]
        results = saved
    (out / "results.json").write_text(json.dumps(results, indent=1))
    log_name = "run-contrib.log" if saved is not None else "run.log"
    (out / log_name).write_text("\n".join(log_lines) + "\n")
    report.write(results, out, report_path, replot=saved is None)
    log(f"done in {duration:.0f} s: {report_path}, {out}/results.json, plots")


if __name__ == "__main__":
    app.run(main)
