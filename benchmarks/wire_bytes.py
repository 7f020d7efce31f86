"""Section 2 of BENCHMARKS.md, bytes on the wire: loopback bytes a local step, against theory.

One worker of section 1's TF1 cluster runs each configuration alone in its private network
namespace (run.py's loopback cluster; without a namespace the section is skipped), counting
the bytes on its loopback over 128 steps after 64 of warm-up; the theory is the payload the
algorithm must move (the model both ways a step for async SGD, an exchange for EASGD).
"""

from benchmarks import throughput
from benchmarks.common import report
from benchmarks.common.report import num, table

QUICK_CONFIGS = ("local", "async", "easgd-10", "easgd-64")


def measure(cluster, quick, log):
    """{"bytes_window": {"warm_steps", "steps"}, "bytes": {config: bytes a local step}}."""
    steps = {"warm_steps": 64, "steps": 64 if quick else 128}
    measured = {}
    for config in QUICK_CONFIGS if quick else throughput.configs(quick):
        container = cluster.build(config, throughput.MLP, [0])
        (answer,) = cluster.call([0], "count_bytes", **steps)
        cluster.release([0], container)
        measured[config] = answer["lo_bytes"] / answer["steps"]
        log(f"  bytes {config:>15}: {measured[config] / 1e6:.3f} MB a step")
    return {"bytes_window": steps, "bytes": measured}


def theory_bytes(config, params, window=None):
    """Bytes per local step the algorithm must move (payload), or None if unknown; with a
    `window` (warm-up steps, counted steps), EASGD counts the exchanges that fall in it."""
    payload = 2 * params * 4
    if config == "local":
        return 0.0
    if config in ("async", "sync"):
        return float(payload)  # Read every variable, send every gradient.
    if "easgd-" not in config:
        return None
    period = int(config.split("easgd-", 1)[1].split("-", 1)[0])
    if config.endswith("-bf16"):
        payload //= 2
    if window is None:
        return payload / period
    warm, counted = window
    return payload * ((warm + counted) // period - warm // period) / counted


def _theory(results, config):
    window = results["bytes_window"]
    params = results["models"][throughput.MLP]["params"]
    return theory_bytes(config, params, (window["warm_steps"], window["steps"]))


def render(results):
    """The Markdown of section 2, or why it was skipped."""
    made = report.made_by(results, "bytes", "wire_bytes")
    out = ["## 2. Bytes on the wire per local step", "", made, ""]
    if "bytes" not in results:
        return [*out, f"Skipped: {results.get('netns_skip_reason') or 'not run'}.", ""]
    base, rows = results["bytes"].get("local", 0.0), []
    for config, value in results["bytes"].items():
        theory = _theory(results, config)
        ratio = num((value - base) / theory if theory else None, 3)
        rows.append(f"{config} | {value / 1e6:.3f} | {num(theory and theory / 1e6, 3)} | {ratio}")
    header = "-configuration | MB a step | theory MB | (MB - local's) / theory"
    return [*out, BYTES, "", table(header, rows), ""]


def targets(results):
    """The (target, measured, met) row: EASGD's bytes within 10 % of theory."""
    if "bytes" not in results:
        return []
    base = results["bytes"].get("local", 0.0)
    easgd = {c: v for c, v in results["bytes"].items() if c.startswith("easgd-")}
    ratios = [(v - base) / _theory(results, c) for c, v in easgd.items()]
    met = all(abs(ratio - 1) <= 0.10 for ratio in ratios)
    measured = ", ".join(f"{ratio:.3f}" for ratio in ratios)
    return [("EASGD's bytes a step within 10 % of theory, every period", measured, met)]


BYTES = """\
Loopback bytes per local step of one worker, alone in a namespace, 128 steps after 64, against
the payload (the model both ways a step for async SGD, an exchange for EASGD)."""
