"""The contrib section: section 1's throughput side by side with the original contrib.

`tf.contrib.opt.ElasticAverageOptimizer` runs on TensorFlow 1.15 (`.venv-tf115`, made by
`make test-contrib`) in a cluster of `contrib_task.py`; this package runs on this
Python's TensorFlow in a cluster of `task.py`. `run.py` calls `contrib_section`.
"""

import os
import pathlib
import time

import numpy as np

from benchmarks import specs as models
from benchmarks.cluster import BenchCluster
from benchmarks.provenance import ROOT
from benchmarks.sections import (
    CALL_TIMEOUT_SECS,
    build_config,
    format_rates,
    release,
    timed_window,
)

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
            container = build_config(cluster, config, spec.name, workers, **extra[side])
            prints = cluster.call_all(workers, "fingerprint", CALL_TIMEOUT_SECS)
            reference = reference or prints
            _check_fingerprints(prints, reference, f"{side} {config}")
            fingerprints[side].setdefault(config, prints)
            idle_before, started = idle.cpu_seconds(), time.monotonic()
            rates = timed_window(cluster, workers, seconds, warm_secs)
            idle_cpu += idle.cpu_seconds() - idle_before
            window_secs += time.monotonic() - started
            release(cluster, workers, container)
            runs[side].setdefault(config, []).append({"round": round_index, "per_worker": rates})
            log(f"  {side:>7} {config:>16} round {round_index}: {format_rates(rates)} steps/s")
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


def contrib_section(
    results, contrib_python, workers, rounds, seconds, warm_secs, netns, log_dir, log
):
    """The contrib section: its own provenance, and `contrib_side_by_side`'s figures.

    Args:
        results: this run's results so far (command, revision, machine).
        contrib_python: Python of TensorFlow 1.15 with tf.contrib, or None for
            .venv-tf115/bin/python of the checkout.
        workers: workers of each cluster.
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
    python = pathlib.Path(contrib_python or ROOT / ".venv-tf115" / "bin" / "python")
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
            workers,
            "tf1",
            log_dir / "contrib-tf115",
            netns=netns,
            python=python,
            module="benchmarks.contrib_task",
        ) as theirs,
        BenchCluster(1, workers, "tf1", log_dir / "contrib-package", netns=netns) as ours,
    ):
        versions = {key: theirs.ready["worker0"][key] for key in ("tensorflow", "python")}
        log(
            f"clusters up: 1 ps + {workers} workers each, TensorFlow "
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
