"""The exchange at its floor: one exchange alone, its CPU and page faults, against memcpy.

Between one worker and one ps process, worker 0 runs EASGD's exchange op alone many times:
EASGD's (`easgd-1`), the copy-only floor (`copy-easgd-1`) and the 16-bit wire, each with
the C allocator as it is and with `reuse_freed_memory`'s settings (a cluster of each,
rounds interleaved); beside them, memcpy's bandwidth on a buffer of the model's size.
"""

import statistics
import time

import numpy as np

from benchmarks.common import protocol, report
from benchmarks.common.harness import BenchCluster, interleaved
from benchmarks.common.report import table

CONFIGS = ("easgd-1", "copy-easgd-1", "easgd-1-bf16")
ALLOCATORS = ("glibc default", "reuse_freed_memory")
TASKS = ("worker0", "ps0")
FORMATS = (".1f", ".1f", ".1f", ",.0f", ".2f", ".0f")  # Of the table's numbers.


def measure(quick, netns, logs, log):
    """{"model", "model_bytes", "count", "memcpy_gb_per_sec", "runs": {allocator: {config:
    [per round: {"wall_secs" (median), "cpu_secs" and "page_faults": {task: per exchange}}]}}}."""
    spec, (rounds, count) = protocol.COMM_MLP, (1, 10) if quick else (3, 30)
    results = {"model": spec.name, "model_bytes": spec.num_params * 4, "count": count,
               "memcpy_gb_per_sec": memcpy_gb_per_sec(spec.num_params * 4),
               "runs": {a: {c: [] for c in CONFIGS} for a in ALLOCATORS}}  # fmt: skip
    log(f"exchange: memcpy {results['memcpy_gb_per_sec']:.1f} GB/s on {spec.name}'s bytes")
    with (
        BenchCluster(1, logs / "exchange-plain", netns=netns, malloc=False) as plain,
        BenchCluster(1, logs / "exchange-tuned", netns=netns) as tuned,
    ):
        clusters = dict(zip(ALLOCATORS, (plain, tuned), strict=True))
        for round_index in range(rounds):
            for allocator in interleaved(ALLOCATORS, round_index):
                for config in interleaved(CONFIGS, round_index):
                    cluster = clusters[allocator]
                    container = cluster.build(config, spec.name, [0], standalone_exchange=True)
                    cluster.call([0], "exchange", count=3)  # Warm-up.
                    before = {task: cluster.stat(task) for task in TASKS}
                    (answer,) = cluster.call([0], "exchange", count=count)
                    after = {task: cluster.stat(task) for task in TASKS}
                    cpu, faults = ({t: (after[t][i] - before[t][i]) / count for t in TASKS}
                                   for i in (0, 1))  # fmt: skip
                    m = {"wall_secs": statistics.median(answer["secs"]), "cpu_secs": cpu,
                         "page_faults": faults}  # fmt: skip
                    cluster.release([0], container)
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


def median_cpu_ms(runs):
    """The median CPU (worker + ps) of an exchange in `runs`, ms."""
    return statistics.median(sum(r["cpu_secs"].values()) for r in runs) * 1e3


def cpu_ms_per_mb(model_bytes, config, runs):
    """The median CPU (worker + ps) of `config`'s exchanges per MB they put on the wire:
    the model both ways, each at 16 bits with a `-bf16` wire."""
    wire_mb = model_bytes * (1 if config.endswith("-bf16") else 2) / 1e6
    return median_cpu_ms(runs) / wire_mb


def _tuned_runs(results):
    """{config: runs} of the exchange section with reuse_freed_memory; {} if not measured."""
    return results.get("exchange", {}).get("runs", {}).get("reuse_freed_memory", {})


def floor_ms_per_mb(results):
    """`cpu_ms_per_mb` at the exchange's floor (`copy-easgd-1` with reuse_freed_memory), or
    None if not measured."""
    runs = _tuned_runs(results)
    if "copy-easgd-1" not in runs:
        return None
    return cpu_ms_per_mb(results["exchange"]["model_bytes"], "copy-easgd-1", runs["copy-easgd-1"])


def arithmetic_ms(results):
    """The CPU (worker + ps) EASGD's arithmetic adds to an exchange, ms: the median of
    `easgd-1` less that of `copy-easgd-1`, with reuse_freed_memory; None if not measured."""
    runs = _tuned_runs(results)
    if not {"easgd-1", "copy-easgd-1"} <= set(runs):
        return None
    return median_cpu_ms(runs["easgd-1"]) - median_cpu_ms(runs["copy-easgd-1"])


def render(results):
    section = results.get("exchange")
    if section is None:
        return []
    memcpy_ms_per_mb, rows = 1 / section["memcpy_gb_per_sec"], []
    for allocator, by_config in section["runs"].items():
        for config, runs in by_config.items():

            def med(get, runs=runs):
                return statistics.median(get(run) for run in runs)

            cpu_per_mb = cpu_ms_per_mb(section["model_bytes"], config, runs)
            wall = med(lambda r: r["wall_secs"]) * 1e3
            worker, ps = (med(lambda r, t=t: r["cpu_secs"][t]) * 1e3 for t in TASKS)
            faults = med(lambda r: sum(r["page_faults"].values()))
            cells = (wall, worker, ps, faults, cpu_per_mb, cpu_per_mb / memcpy_ms_per_mb)
            rows.append(
                [allocator, config, *(f"{c:{f}}" for c, f in zip(cells, FORMATS, strict=True))]
            )
    header = "-allocator | -configuration | wall ms | worker CPU ms | ps CPU ms | page faults | "
    header += "CPU ms per MB moved | x memcpy"
    text = (
        f"One exchange of {section['model']} alone, {section['count']} times against one ps, "
        f"medians of interleaved rounds; CPU per MB the exchange puts on the wire, against "
        f"memcpy's {section['memcpy_gb_per_sec']:.1f} GB/s here."
    )
    made = report.made_by(results, "exchange", "exchange")
    out = ["## The exchange at its floor", "", made, "", text, "", table(header, rows), ""]
    arithmetic = arithmetic_ms(results)
    if arithmetic is not None:
        out += [
            f"`easgd-1` less `copy-easgd-1` is EASGD's arithmetic, {arithmetic:.1f} ms of CPU "
            "an exchange (reuse_freed_memory): on each side a subtraction and a scaled update "
            "in place, TensorFlow's kernels, two passes over the model that no copy-only "
            "exchange makes. On cores the copy already fills, it bounds easgd-10 against "
            "copy-easgd-10 (the target above).",
            "",
        ]
    return out
