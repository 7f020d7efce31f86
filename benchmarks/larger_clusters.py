"""Section 6 of BENCHMARKS.md, a cost model and larger clusters: what section 5 predicts.

It measures nothing: common/cost_model.py, with the CPU of an exchange that `make
bench-scale` measured (benchmarks/results/scale.json) and the link efficiency fitted on
section 5's shaped runs, predicts the steps/s of clusters too large for this machine and
the fewest workers at which a worker slows. Section 5 (shaped.py) draws the same model
beside its measurements.
"""

import json
import pathlib

from benchmarks.common import cost_model, protocol
from benchmarks.common.network import rate_bits_per_sec
from benchmarks.common.report import median_of, table

SCALE_RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "scale.json"
#: Section 6's larger clusters: link rates (bits/s), ps tasks (of 4 cores), workers.
PREDICTED_RATES, PREDICTED_PS, PREDICTED_WORKERS = (10e9, 25e9), (1, 4), (8, 64, 256)
PREDICTED_CONFIGS = ("async", "sync", "easgd-10", "easgd-64", "easgd-10-overlap")


def box(results, rate, workers):
    """The shaped cluster as the cost model sees it: every task on the machine's cores, and
    the exchange of section 5's runs (replies after the updates in runs that predate
    "replies_at_once")."""
    cores = results.get("machine", {}).get("cores") or 2
    late = not results.get("shaped", {}).get("replies_at_once", False)
    return cost_model.Cluster(rate_bits_per_sec(rate), workers, 1, shared_cores=cores,
                              late_replies=late)  # fmt: skip


def measured_costs(path=SCALE_RESULTS):
    """The CPU of an exchange `make bench-scale` measured without reuse_freed_memory, per
    byte on each side, and its commit; no CPU without it."""
    try:
        scale = json.loads(pathlib.Path(path).read_text())
        row = scale["constants_untuned"]
    except (OSError, KeyError, ValueError):
        return cost_model.Costs(), None
    moved = 2 * 4 * protocol.MODELS[row["model"]].num_params * row["exchanges"]
    worker, ps = row["hosts_cpu"] / moved, sum(row["ps_cpu"]) / moved
    return cost_model.Costs(worker_byte_secs=worker, ps_byte_secs=ps), scale["revision"]["commit"]


def fitted(results):
    """The cost model's `Costs` for the shaped runs: the measured CPU, the fitted link."""
    section, rows = results["shaped"], []
    for rate, measured in section["rates"].items():
        cluster, by_config = box(results, rate, section["workers"]), measured["throughput"]
        compute = 1.0 / median_of(by_config, "local")
        for config in by_config:
            median = median_of(by_config, config)
            if config != "local" and median > 0:
                rows.append((config, compute, cluster, 1.0 / median))
    model_bytes = 4.0 * results["models"][section["model"]]["params"]
    return cost_model.fit_link_efficiency(rows, model_bytes, measured_costs()[0])


def render(results):
    """The Markdown of section 6: the cost model's predictions for larger clusters, where
    section 5 was measured."""
    section = results.get("shaped", {})
    if "rates" not in section:
        return []
    params, fit = results["models"][section["model"]]["params"], fitted(results)
    first = next(iter(section["rates"].values()))
    compute, rows = 1 / median_of(first["throughput"], "local"), []
    for config in PREDICTED_CONFIGS:
        for ps_tasks in PREDICTED_PS:
            cells = [config, ps_tasks]
            for rate in PREDICTED_RATES:
                one = cost_model.Cluster(rate, 1, ps_tasks, ps_cores=4)
                limit = cost_model.scaling_limit(config, compute, 4.0 * params, one, fit)
                cells.append("> 100,000" if limit is None else f"{limit:,}")
            for workers in PREDICTED_WORKERS:
                cluster = cost_model.Cluster(10e9, workers, ps_tasks, ps_cores=4)
                step = cost_model.step_time(config, compute, 4.0 * params, cluster, fit)
                cells.append(f"{1 / step:.1f}")
            rows.append(cells)
    header = "-algorithm | ps tasks | slows at W (10 Gbit/s) | slows at W (25 Gbit/s) | "
    header += " | ".join(f"steps/s, W={w}" for w in PREDICTED_WORKERS)
    text = MODEL.format(worker=fit.worker_byte_secs * 1e9, ps=fit.ps_byte_secs * 1e9,
                        e=fit.link_efficiency, commit=measured_costs()[1] or "none (no scale.json)",
                        compute=compute * 1e3)  # fmt: skip
    return [
        "## 6. A cost model, and larger clusters",
        "",
        MADE,
        "",
        text,
        "",
        table(header, rows),
        "",
    ]


MADE = (
    "Made by `benchmarks/larger_clusters.py` from section 5's runs (`make bench-shaped`) and "
    "the CPU of an exchange that `make bench-scale` measured; it measures nothing itself."
)
MODEL = """\
`benchmarks/common/cost_model.py` (docs/SCALING.md) with the CPU of an exchange from
`make bench-scale` at commit {commit} ({worker:.2f} ns a byte on the worker, {ps:.2f} on the
ps), link efficiency e = {e:.2f} fitted on section 5, c = {compute:.1f} ms of compute, a
machine per task (ps of 4 cores), no crowding (SCALING.md's rule adds it: these are upper
bounds past a few workers). "Slows at W": the fewest workers at which a worker falls below
0.9 x its speed alone."""
