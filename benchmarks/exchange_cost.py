"""The exchange at the floor of the runtime: what one exchange costs, against memcpy.

`exchange_section` runs EASGD's exchange alone (no local step), many times, between one
worker and one ps process, and measures per exchange its wall time, each process's CPU
time and page faults: for EASGD's exchange, the copy-only floor (`copy_only.py`: the same
calls and bytes, no arithmetic) and the 16-bit wire, each with the C allocator as it is
and with `tf_contrib_easgd.reuse_freed_memory`'s settings (a cluster of each, rounds
interleaved). Beside it, this machine's memcpy bandwidth on a buffer of the model's size:
the physical limit of moving those bytes. BENCHMARKS.md ("The exchange at its floor").
"""

import statistics
import time

import numpy as np

from benchmarks import sections
from benchmarks import specs as models
from benchmarks.cluster import BenchCluster

CONFIGS = ("easgd-1", "copy-easgd-1", "easgd-1-bf16")
ALLOCATORS = ("glibc default", "reuse_freed_memory")
TASKS = ("worker0", "ps0")
WARM_EXCHANGES = 3


def exchange_section(model, rounds, count, netns, log_dir, log):
    """Per-exchange costs of every configuration under both allocator settings.

    Returns:
        {"memcpy_gb_per_sec", "model_bytes", "runs": {allocator: {config: [per round:
        {"wall_secs" (median), "cpu_secs": {task: per exchange}, "page_faults": {task: per
        exchange}}]}}}.
    """
    spec = models.MODELS[model]
    results = {
        "model": model,
        "model_bytes": spec.num_params * 4,
        "count": count,
        "memcpy_gb_per_sec": memcpy_gb_per_sec(spec.num_params * 4),
        "runs": {allocator: {config: [] for config in CONFIGS} for allocator in ALLOCATORS},
    }
    log(f"exchange: memcpy {results['memcpy_gb_per_sec']:.1f} GB/s on {model}'s bytes")
    with (
        BenchCluster(1, 1, "tf1", log_dir / "exchange-plain", netns=netns, reuse_freed_memory=False)
        as plain,
        BenchCluster(1, 1, "tf1", log_dir / "exchange-tuned", netns=netns) as tuned,
    ):  # fmt: skip
        clusters = dict(zip(ALLOCATORS, (plain, tuned), strict=True))
        for round_index in range(rounds):
            order = CONFIGS if round_index % 2 == 0 else tuple(reversed(CONFIGS))
            for allocator in ALLOCATORS if round_index % 2 == 0 else ALLOCATORS[::-1]:
                for config in order:
                    measured = _measure(clusters[allocator], config, model, count)
                    results["runs"][allocator][config].append(measured)
                    log(
                        f"  {allocator:>18} {config:>14} round {round_index}: "
                        f"{measured['wall_secs'] * 1e3:.1f} ms, CPU worker "
                        f"{measured['cpu_secs']['worker0'] * 1e3:.1f} ms, ps "
                        f"{measured['cpu_secs']['ps0'] * 1e3:.1f} ms, page faults "
                        f"{sum(measured['page_faults'].values()):.0f} per exchange"
                    )
    return results


def _measure(cluster, config, model, count):
    """One configuration's exchanges on `cluster`: medians and per-exchange costs."""
    container = sections.build_config(cluster, config, model, [0], standalone_exchange=True)
    cluster.call(0, "exchange", sections.CALL_TIMEOUT_SECS, count=WARM_EXCHANGES)
    cpu = {task: cluster.cpu_seconds(task) for task in TASKS}
    faults = {task: cluster.page_faults(task) for task in TASKS}
    answer = cluster.call(0, "exchange", sections.CALL_TIMEOUT_SECS, count=count)
    measured = {
        "wall_secs": statistics.median(answer["secs"]),
        "cpu_secs": {task: (cluster.cpu_seconds(task) - cpu[task]) / count for task in TASKS},
        "page_faults": {task: (cluster.page_faults(task) - faults[task]) / count for task in TASKS},
    }
    sections.release(cluster, [0], container)
    return measured


def memcpy_gb_per_sec(num_bytes, repeats=50):
    """This machine's copy bandwidth on `num_bytes` (median of `repeats` copies), GB/s."""
    source = np.ones(num_bytes // 4, np.float32)
    target = np.empty_like(source)
    np.copyto(target, source)  # Faults the target's pages in first.
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(target, source)
        seconds.append(time.perf_counter() - started)
    return num_bytes / statistics.median(seconds) / 1e9


def wire_bytes_per_exchange(config, model_bytes):
    """What an exchange of `config` moves between the worker and the ps, both ways."""
    return model_bytes if config.endswith(("-bf16", "-fp16")) else 2 * model_bytes
