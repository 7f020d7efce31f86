"""Section 3 of BENCHMARKS.md, time to accuracy: seconds until the shared model reaches 97 %.

On section 1's TF1 cluster (run.py's loopback cluster), the digits MLP trains with SGD 0.05
under EASGD with contrib's moving rate and the paper's, async SGD and one worker alone;
worker 0 evaluates the shared model every 0.5 s. Its target: EASGD with the paper's moving
rate no slower than async SGD.
"""

from benchmarks.common import report
from benchmarks.common.harness import time_to_accuracy
from benchmarks.common.report import table

#: easgd-train's defaults on loopback: the paper's moving rate 0.9 / W, rho 0.
PAPER_EASGD = "easgd-10-alpha0.45"
CONFIGS = ((PAPER_EASGD, None), ("easgd-10", None), ("async", None), ("local", 1))
QUICK_CONFIGS = ((PAPER_EASGD, None), ("async", None), ("local", 1))


def measure(cluster, quick, log):
    """{config: [runs]} on `cluster`, the TF1 cluster of 1 ps + the workers."""
    # Every configuration reaches 97 % within 4 s (3.5 s the slowest run here).
    repeats, seconds = (1, 5.0) if quick else (2, 12.0)
    configs = QUICK_CONFIGS if quick else CONFIGS
    return time_to_accuracy(cluster, configs, repeats, seconds, 0.5, log)


def render(results, plots):
    """The Markdown of section 3, where measured."""
    if "accuracy" not in results:
        return []
    rows = report.accuracy_rows(results["accuracy"])
    made = report.made_by(results, "accuracy", "accuracy")
    out = ["## 3. Time to accuracy", "", made, "", ACCURACY, ""]
    out += [table(report.ACCURACY_HEADER, rows), ""]
    return out + ([f"![learning curves]({plots['accuracy']})", ""] if "accuracy" in plots else [])


def targets(results):
    """The (target, measured, met) row: EASGD with the paper's moving rate against async."""
    summary = report.accuracy_summary(results.get("accuracy", {}))
    if PAPER_EASGD not in summary or "async" not in summary:
        return []
    easgd, other = (report.median_time(summary[c][0]) for c in (PAPER_EASGD, "async"))
    measured = f"{report.seconds(easgd)}; async {report.seconds(other)}"
    met = easgd is not None and (other is None or easgd <= other)
    return [(f"time to 97 %: `{PAPER_EASGD}` <= async SGD", measured, met)]


def plot(results, out):
    """accuracy.png into `out`: {name: path}."""
    if "accuracy" not in results:
        return {}
    return {"accuracy": report.curves(results["accuracy"], out / "accuracy.png")}


ACCURACY = """\
The digits MLP (2.2 M parameters), SGD 0.05; worker 0 evaluates the shared model every 0.5 s.
`easgd-10`: contrib's moving rate (0.9 / tau / W), `easgd-10-alpha0.45`: the paper's."""
