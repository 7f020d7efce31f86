"""BENCHMARKS.md's parts on the exchange itself: its floor, and hiding it behind compute.

From `exchange_cost.exchange_section` (what one exchange costs each process, against
memcpy) and `shaped.pinned_section` (one worker on a core of its own at 1 Gbit/s): their
tables, their targets.
"""

import statistics

from benchmarks import exchange_cost, shaped
from benchmarks.tables import per_round_ratio, summarize_throughput

#: The pinned section's target: the overlapped exchange hides behind the local steps.
PINNED_TARGET = ("easgd-10-overlap", "local", 0.95)


def _median(runs, get):
    return statistics.median(get(run) for run in runs)


def exchange_cost_summary(section):
    """{allocator: {config: {wall, worker, ps, faults, cpu_ms_per_mb}}}: medians over rounds,
    milliseconds (CPU per MB moved on the wire, both processes)."""
    summary = {}
    for allocator, by_config in section["runs"].items():
        summary[allocator] = {}
        for config, runs in by_config.items():
            cpu = _median(runs, lambda r: r["cpu_secs"]["worker0"] + r["cpu_secs"]["ps0"])
            moved_mb = exchange_cost.wire_bytes_per_exchange(config, section["model_bytes"]) / 1e6
            summary[allocator][config] = {
                "wall": _median(runs, lambda r: r["wall_secs"]) * 1e3,
                "worker": _median(runs, lambda r: r["cpu_secs"]["worker0"]) * 1e3,
                "ps": _median(runs, lambda r: r["cpu_secs"]["ps0"]) * 1e3,
                "faults": _median(runs, lambda r: sum(r["page_faults"].values())),
                "cpu_ms_per_mb": cpu * 1e3 / moved_mb,
            }
    return summary


def memcpy_ms_per_mb(section):
    """What copying one MB costs on this machine, in ms."""
    return 1e3 / (section["memcpy_gb_per_sec"] * 1e3)


def exchange_part(results):
    """The Markdown of the exchange's floor."""
    section = results.get("exchange")
    out = ["## The exchange at its floor", ""]
    if section is None:
        return []
    summary = exchange_cost_summary(section)
    memcpy = memcpy_ms_per_mb(section)
    rounds = len(next(iter(next(iter(section["runs"].values())).values())))
    out += [
        _STATIC_EXCHANGE.format(
            model=section["model"],
            mb=section["model_bytes"] / 1e6,
            count=section["count"],
            rounds=rounds,
            gbps=section["memcpy_gb_per_sec"],
        ),
        "",
        "| allocator | configuration | wall ms per exchange | worker CPU ms | ps CPU ms "
        "| page faults (both) | CPU ms per MB moved (both) | x memcpy |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for allocator, by_config in summary.items():
        for config, row in by_config.items():
            out.append(
                f"| {allocator} | {config} | {row['wall']:.1f} | {row['worker']:.1f} | "
                f"{row['ps']:.1f} | {row['faults']:,.0f} | {row['cpu_ms_per_mb']:.2f} | "
                f"{row['cpu_ms_per_mb'] / memcpy:.0f} |"
            )
    out.append("")
    return out


def pinned_part(results):
    """The Markdown of the pinned section: one worker on its own core at 1 Gbit/s."""
    section = results.get("pinned")
    if section is None:
        return []
    out = ["### One worker on a core of its own", ""]
    if "throughput" not in section:
        return [*out, f"Skipped: {section.get('skipped', 'not run')}.", ""]
    by_config = section["throughput"]
    summary = summarize_throughput(by_config)
    local = summary["local"][0]
    rounds = len(next(iter(by_config.values())))
    out += [
        _STATIC_PINNED.format(
            cpus=", ".join(
                f"{job} on CPU {','.join(map(str, cpus))}" for job, cpus in section["cpus"].items()
            ),
            rounds=rounds,
        ),
        "",
        "| configuration | steps/s (median) | min | max | x local, per round "
        "| MB on the ps's link per local step | worker CPU share | ps CPU share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for config, (median, low, high) in summary.items():
        runs = by_config[config]
        link = _median(runs, shaped.link_bytes_per_step) / 1e6
        ratio = per_round_ratio(by_config, config, "local")
        worker = _median(runs, lambda r: r["cpu_share"]["worker0"])
        ps = _median(runs, lambda r: r["cpu_share"]["ps0"])
        out.append(
            f"| {config} | {median:.2f} | {low:.2f} | {high:.2f} | {ratio:.2f} | {link:.2f} | "
            f"{worker:.2f} | {ps:.2f} |"
        )
    return [*out, "", f"(x local: {local:.2f} steps/s alone.)", ""]


def targets(results):
    """(target, measured, met) rows: easgd-10 against its copy-only floor is section 1's;
    here the pinned overlap."""
    section = results.get("pinned", {})
    if "throughput" not in section:
        return []
    config, reference, goal = PINNED_TARGET
    ratio = per_round_ratio(section["throughput"], config, reference)
    return [
        (
            f"{config} >= {goal:g} x {reference}, one worker on a core of its own (1 Gbit/s)",
            "-" if ratio is None else f"{ratio:.2f} x (median of per-round ratios)",
            None if ratio is None else ratio >= goal,
        )
    ]


_STATIC_EXCHANGE = """\
One exchange alone, with no local step around it: worker 0 runs EASGD's exchange op
{count} times (after 3 to warm up) against one ps process, {model} ({mb:.1f} MB of
float32), TF1 mode, the direct transport; each process's CPU time and page faults are read
from /proc around the calls. `easgd-1` is EASGD's exchange, `copy-easgd-1` the copy-only
floor (the same calls and bytes, no arithmetic), `easgd-1-bf16` the 16-bit wire (half the
bytes, more passes over the values). "glibc default" is the C allocator as a process gets
it, "reuse_freed_memory" the settings of `tf_contrib_easgd.reuse_freed_memory` (which
easgd-train's tasks and the other sections' processes use): large freed blocks stay in the
heap instead of being unmapped and faulted in again at the next exchange. Medians of
{rounds} interleaved rounds. "CPU ms per MB moved" is both processes' CPU over the bytes the
exchange puts on the wire (both ways); beside it, this machine's memcpy moves
{gbps:.1f} GB/s on a buffer of the model's size, the physical limit of touching those bytes
once. The rest is TensorFlow's RecvTensor path and the kernel's loopback TCP: per byte, one
copy into the socket, one out of it, one into the tensor, per direction, plus the
arithmetic's passes."""

_STATIC_PINNED = """\
The overlapped exchange needs a core to run on while the worker computes: on this 2-core
machine, with 2 workers and the ps, there is none (section 5 gives the CPU shares). Here one
worker is pinned to one core and the ps to the other (`taskset`: {cpus}), each on its
own host with a 1 Gbit/s link, as on separate machines with cores >= tasks; {rounds}
interleaved rounds. A CPU share is the CPU seconds a process used per second of the
window."""
