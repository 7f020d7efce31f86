"""The exchange at its floor: one exchange alone, its CPU and page faults, against memcpy.

Between one worker and one ps process, worker 0 runs EASGD's exchange op alone many times:
EASGD's (`easgd-1`), the copy-only floor (`copy-easgd-1`) and the 16-bit wire, each with
the C allocator as it is and with `reuse_freed_memory`'s settings (a cluster of each,
rounds interleaved); beside them, memcpy's bandwidth on a buffer of the model's size.
"""

import statistics
import time

import numpy as np

from benchmarks import specs
from benchmarks.harness import BenchCluster
from benchmarks.rounds import CALL_TIMEOUT_SECS, build_config, interleaved, release
from benchmarks.tables import table

CONFIGS = ("easgd-1", "copy-easgd-1", "easgd-1-bf16")
ALLOCATORS = ("glibc default", "reuse_freed_memory")
TASKS = ("worker0", "ps0")


def measure(rounds, count, netns, logs, log):
    """{"model", "model_bytes", "count", "memcpy_gb_per_sec", "runs": {allocator: {config:
    [per round: {"wall_secs" (median), "cpu_secs" and "page_faults": {task: per exchange}}]}}}."""
    spec = specs.COMM_MLP
    results = {
        "model": spec.name,
        "model_bytes": spec.num_params * 4,
        "count": count,
        "memcpy_gb_per_sec": memcpy_gb_per_sec(spec.num_params * 4),
        "runs": {a: {c: [] for c in CONFIGS} for a in ALLOCATORS},
    }
    log(f"exchange: memcpy {results['memcpy_gb_per_sec']:.1f} GB/s on {spec.name}'s bytes")
    with (
        BenchCluster(
            1, 1, "tf1", logs / "exchange-plain", netns=netns, reuse_freed_memory=False
        ) as plain,
        BenchCluster(1, 1, "tf1", logs / "exchange-tuned", netns=netns) as tuned,
    ):
        clusters = dict(zip(ALLOCATORS, (plain, tuned), strict=True))
        for round_index in range(rounds):
            for allocator in interleaved(ALLOCATORS, round_index):
                for config in interleaved(CONFIGS, round_index):
                    cluster = clusters[allocator]
                    container = build_config(
                        cluster, config, spec.name, [0], standalone_exchange=True
                    )
                    cluster.call(0, "exchange", CALL_TIMEOUT_SECS, count=3)  # Warm-up.
                    cpu = {task: cluster.cpu_seconds(task) for task in TASKS}
                    faults = {task: cluster.page_faults(task) for task in TASKS}
                    answer = cluster.call(0, "exchange", CALL_TIMEOUT_SECS, count=count)
                    m = {
                        "wall_secs": statistics.median(answer["secs"]),
                        "cpu_secs": {t: (cluster.cpu_seconds(t) - cpu[t]) / count for t in TASKS},
                        "page_faults": {
                            t: (cluster.page_faults(t) - faults[t]) / count for t in TASKS
                        },
                    }
                    release(cluster, [0], container)
                    results["runs"][allocator][config].append(m)
                    cpu = sum(m["cpu_secs"].values()) * 1e3
                    log(f"  {allocator:>18} {config:>14} round {round_index}: {cpu:.1f} ms CPU")
    return results


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


def render(results):
    section = results.get("exchange")
    if section is None:
        return []
    memcpy_ms_per_mb, rows = 1 / section["memcpy_gb_per_sec"], []
    for allocator, by_config in section["runs"].items():
        for config, runs in by_config.items():

            def med(get, runs=runs):
                return statistics.median(get(run) for run in runs)

            wire_mb = section["model_bytes"] * (1 if config.endswith("-bf16") else 2) / 1e6
            cpu_per_mb = med(lambda r: sum(r["cpu_secs"].values())) * 1e3 / wire_mb
            wall = med(lambda r: r["wall_secs"]) * 1e3
            worker = med(lambda r: r["cpu_secs"]["worker0"]) * 1e3
            ps = med(lambda r: r["cpu_secs"]["ps0"]) * 1e3
            faults = med(lambda r: sum(r["page_faults"].values()))
            rows.append(
                f"{allocator} | {config} | {wall:.1f} | {worker:.1f} | {ps:.1f} | {faults:,.0f} | "
                f"{cpu_per_mb:.2f} | {cpu_per_mb / memcpy_ms_per_mb:.0f}"
            )
    header = "-allocator | -configuration | wall ms | worker CPU ms | ps CPU ms | page faults | "
    header += "CPU ms per MB moved | x memcpy"
    text = (
        f"One exchange of {section['model']} alone, {section['count']} times against one ps, "
        f"medians of interleaved rounds; CPU per MB the exchange puts on the wire, against "
        f"memcpy's {section['memcpy_gb_per_sec']:.1f} GB/s here."
    )
    return ["## The exchange at its floor", "", text, "", table(header, rows), ""]
