"""The cost model's constants from a run of the scale harness, and its predictions beside it.

The CPU of an exchange comes from the measurements themselves (`costs`): the constants
pass's back-to-back exchanges of two model sizes give the per-call and per-byte parts, the
unshaped windows a load factor per side; the windows without exchanges the overhead of a
local step and the compute; the rate-limited windows the link efficiency, the one fitted
number. `comparison` puts every window beside the model's prediction.
"""

import dataclasses
import math
import statistics

import numpy as np

from benchmarks import cost_model, specs
from tf_contrib_easgd.trainer.network import rate_bits_per_sec


def percentiles(values):
    """{"median", "p99", "mean", "n"} of `values` (None where empty)."""
    if not values:
        return {"median": None, "p99": None, "mean": None, "n": 0}
    return {
        "median": float(np.median(values)),
        "p99": float(np.percentile(values, 99)),
        "mean": float(np.mean(values)),
        "n": len(values),
    }


def wire_bytes(params, wire):
    """Bytes an exchange sends each way: 4 per parameter, or 2 on a 16-bit wire."""
    return params * (2 if wire else 4)


def per_exchange(m):
    """(ps CPU, worker hosts' CPU) per exchange of window `m`, seconds."""
    return sum(m["ps_cpu"]) / m["exchanges"], m["hosts_cpu"] / m["exchanges"]


def rough_costs(constants, model):
    """{wire: `Costs`} from the constants pass alone (the model's row, 1 ps task, a third
    more CPU for a loaded machine, links at 0.7): what `scale.timing` sizes windows with."""
    rough = {}
    for row in constants:
        if row["model"] == model and row["ps"] == 1 and row["exchanges"]:
            ps, worker = per_exchange(row)
            size = 2 * wire_bytes(specs.MODELS[model].num_params, row["wire"])
            rough[row["wire"]] = cost_model.Costs(
                worker_byte_secs=1.3 * worker / size, ps_byte_secs=1.3 * ps / size,
                link_efficiency=0.7,
            )  # fmt: skip
    return rough


def valid(results):
    """(ps tasks, wire, window) of the windows in which every worker completed an
    exchange on average (fewer: the window was shorter than a worker's cycle)."""
    for pc in results["ps_counts"]:
        for window in pc["windows"]:
            if window["exchanges"] >= window["workers"]:
                yield pc["ps"], pc["wire"], window


def costs(results):
    """`({wire: cost_model.Costs}, compute secs, {wire: (worker, ps) load factors})`.

    The CPU per exchange of the two model sizes of the constants pass (1 ps task, one
    worker exchanging back to back) gives each side's per-byte slope and per-call
    intercept. Many workers at once cost more per exchange (their buffers no longer fit
    the caches, their threads switch): each side's costs are scaled by the median, over
    the unshaped windows, of its measured CPU per exchange over the constants' (the
    "load factor"). The windows without exchanges give the hosts' CPU per local step and
    the effective compute; the rate-limited windows, the link efficiency.
    """
    rows = [r for r in results["constants"] if r["ps"] == 1 and r["exchanges"]]
    local = next(pc["local"] for pc in results["ps_counts"] if "local" in pc)
    step_secs = statistics.median(w["hosts_cpu"] / w["steps"] for w in local)
    compute = statistics.median(w["workers"] * w["seconds"] / w["steps"] for w in local)
    params = specs.MODELS[results["model"]].num_params
    by_wire, factors = {}, {}
    for wire in {r["wire"] for r in rows}:
        points = sorted(
            (2 * wire_bytes(specs.MODELS[r["model"]].num_params, wire), *per_exchange(r))
            for r in rows
            if r["wire"] == wire
        )
        (b0, ps0, w0), (b1, ps1, w1) = points[0], points[-1]
        ps_k = (ps1 - ps0) / (b1 - b0) if b1 > b0 else ps1 / b1
        w_k = (w1 - w0) / (b1 - b0) if b1 > b0 else w1 / b1
        base = cost_model.Costs(
            worker_call_secs=max(0.0, w1 - w_k * b1), worker_byte_secs=w_k,
            ps_call_secs=max(0.0, ps1 - ps_k * b1), ps_byte_secs=ps_k,
            worker_step_secs=step_secs,
        )  # fmt: skip
        unshaped = [(p, m) for p, w, m in valid(results) if w == wire and not m["rate"]]
        ps_factor = _median_ratio(
            (per_exchange(m)[0], p * base.ps_secs(wire_bytes(params, wire), p)) for p, m in unshaped
        )
        worker_factor = _median_ratio(
            (
                per_exchange(m)[1] - m["period"] * step_secs,
                base.worker_secs(wire_bytes(params, wire), p),
            )
            for p, m in unshaped
        )
        by_wire[wire] = dataclasses.replace(
            base,
            worker_call_secs=base.worker_call_secs * worker_factor,
            worker_byte_secs=base.worker_byte_secs * worker_factor,
            ps_call_secs=base.ps_call_secs * ps_factor,
            ps_byte_secs=base.ps_byte_secs * ps_factor,
        )
        factors[wire] = (worker_factor, ps_factor)
    efficiency = _fit_efficiency(results, by_wire, compute)
    by_wire = {w: dataclasses.replace(c, link_efficiency=efficiency) for w, c in by_wire.items()}
    return by_wire, compute, factors


def _median_ratio(pairs):
    ratios = [measured / base for measured, base in pairs if base > 0]
    return statistics.median(ratios) if ratios else 1.0


def window_others(results, window):
    """The share of each pinned core (ps, workers) that the run's processes were not
    charged for in `window` (other processes, the kernel's network work), or None where
    not recorded. Idle time they fill costs the run nothing; at saturation, the kernel
    gives each runnable process of a core an equal share (the model assumes whole cores)."""
    pinned = results["pinning"]
    if "cpus" not in window or pinned["ps"] is None:
        return None
    used = (sum(window["ps_cpu"]), window["hosts_cpu"])
    cores = (int(pinned["ps"]), int(pinned["workers"]))
    return [
        max(0.0, window["cpus"][core] - mine) / window["seconds"]
        for core, mine in zip(cores, used, strict=True)
    ]


def others_share(results):
    """The medians over the windows of `window_others`, or None where not recorded."""
    shares = [window_others(results, w) for _, _, w in valid(results)]
    shares = [share for share in shares if share is not None]
    return [statistics.median(column) for column in zip(*shares, strict=True)] if shares else None


def harness_cluster(workers, ps_tasks, rate):
    """The scale harness as the cost model sees it: the ps tasks share one core, the
    workers' exchanges another (pinned), links at `rate` or not limited."""
    bits = rate_bits_per_sec(rate) if rate else None
    return cost_model.Cluster(bits, workers, ps_tasks, ps_pool_cores=1, worker_pool_cores=1)


def predicted(results, window, ps_tasks, wire, by_wire, compute):
    """The model's `Prediction` for one measured window."""
    params = specs.MODELS[results["model"]].num_params
    cluster = harness_cluster(window["workers"], ps_tasks, window["rate"])
    return cost_model.predict(
        cluster, by_wire[wire], wire_bytes(params, wire), window["period"], compute
    )


def _fit_efficiency(results, by_wire, compute):
    """The link efficiency that best predicts the exchanges/s of the rate-limited windows."""
    limited = [(p, w, m) for p, w, m in valid(results) if m["rate"]]
    best, best_error = 1.0, math.inf
    for efficiency in cost_model.E_GRID:
        trial = {w: dataclasses.replace(c, link_efficiency=efficiency) for w, c in by_wire.items()}
        error = sum(
            math.log(
                predicted(results, m, p, w, trial, compute).exchanges_per_sec
                / (m["exchanges"] / m["seconds"])
            )
            ** 2
            for p, w, m in limited
        )
        if error < best_error:
            best, best_error = float(efficiency), error
    return best


def comparison(results):
    """Every valid window with its prediction (a list of dicts), and what `costs` gives."""
    by_wire, compute, factors = costs(results)
    rows = []
    for ps_tasks, wire, m in valid(results):
        model = predicted(results, m, ps_tasks, wire, by_wire, compute)
        rate = m["exchanges"] / m["seconds"]
        rows.append({
            "ps": ps_tasks, "wire": wire, "rate": m["rate"], "workers": m["workers"],
            "period": m["period"], "measured": rate, "model": model,
            "error": model.exchanges_per_sec / rate - 1, "window": m,
        })  # fmt: skip
    return rows, by_wire, compute, factors


def ms(value):
    """Seconds as whole milliseconds, "-" for None."""
    return "-" if value is None else f"{value * 1e3:.0f}"


def rate_name(rate):
    """ "1gbit" -> "1 Gbit/s"; None (not limited) -> "veth"."""
    return f"{rate_bits_per_sec(rate) / 1e9:g} Gbit/s" if rate else "veth"
