"""Section 4 of BENCHMARKS.md, per-step overhead: EASGD's steps that never exchange.

In fresh processes without a cluster (2 a world, TF1 and TF2), each model's step times of
plain SGD, of EASGD on steps that do not exchange and of SGD + an empty `tf.cond` on a
counter, in blocks. Its target: at most 5 % over SGD; for steps under 1 ms, where any op
costs several percent, at most the empty cond's overhead + 2 points.
"""

import statistics

from benchmarks.common import protocol, report
from benchmarks.common.harness import BenchCluster
from benchmarks.common.report import table

MODELS = (protocol.COMM_MLP, protocol.COMPUTE_CNN, protocol.TINY_MLP)
#: Non-exchange steps' overhead target; for steps shorter than SHORT_STEP_SECS, an empty
#: tf.cond's overhead + COND_MARGIN instead.
OVERHEAD_LIMIT, SHORT_STEP_SECS, COND_MARGIN = 0.05, 1e-3, 0.02


def measure(quick, logs, log):
    """{world: {model: {"processes", "block_secs_per_step", "median_secs_per_step"}}}."""
    worlds = ("tf1",) if quick else ("tf1", "tf2")
    return {world: _overhead(world, quick, logs, log) for world in worlds}


def _overhead(world, quick, logs, log):
    """Per model: each fresh process's answer, and the blocks of all of them pooled."""
    models = [protocol.TINY_MLP.name] if quick else [spec.name for spec in MODELS]
    answers = {model: [] for model in models}
    for index in range(1 if quick else 2):
        with BenchCluster(1, logs / f"overhead-{world}-{index}", world=world) as cluster:
            for model in models:
                blocks = {"blocks": 6 if quick else 8, "block_secs": 0.25}
                answers[model] += cluster.call([0], "overhead", model=model, **blocks)
    results = {}
    for model, processes in answers.items():
        keys = processes[0]["block_secs_per_step"]
        pooled = {k: [s for a in processes for s in a["block_secs_per_step"][k]] for k in keys}
        medians = {key: statistics.median(values) for key, values in pooled.items()}
        results[model] = {"processes": processes, "block_secs_per_step": pooled,
                          "median_secs_per_step": medians}  # fmt: skip
        times = ", ".join(f"{key} {value * 1e3:.3f} ms" for key, value in medians.items())
        log(f"  overhead {world} {model}: {times}")
    return results


def _overheads(answer):
    """(EASGD's, the empty cond's) time per step over plain SGD's, minus 1."""
    m = answer["median_secs_per_step"]
    return m["easgd"] / m["sgd"] - 1, m["cond"] / m["sgd"] - 1


def render(results):
    """The Markdown of section 4, where measured."""
    if "overhead" not in results:
        return []
    rows = []
    for world, by_model in results["overhead"].items():
        for model, answer in by_model.items():
            m, (easgd, cond) = answer["median_secs_per_step"], _overheads(answer)
            rows.append(f"{world} | {model} | {m['sgd'] * 1e3:.3f} | {m['easgd'] * 1e3:.3f} | "
                        f"{easgd * 100:+.1f} % | {cond * 100:+.1f} %")  # fmt: skip
    header = "-world | -model | SGD ms/step | EASGD ms/step | EASGD overhead | empty cond's"
    made = report.made_by(results, "overhead", "overhead")
    return ["## 4. Per-step overhead", "", made, "", OVERHEAD, "", table(header, rows), ""]


def targets(results):
    """(target, measured, met) rows, one a world."""
    rows = []
    for world, by_model in results.get("overhead", {}).items():
        # Below a 1 ms step the Switch that gates the exchange costs what any conditional
        # does: judged against an empty tf.cond's cost, measured beside it.
        parts, met = [], True
        for model, answer in by_model.items():
            easgd, cond = _overheads(answer)
            short = answer["median_secs_per_step"]["sgd"] < SHORT_STEP_SECS
            met &= easgd <= (cond + COND_MARGIN if short else OVERHEAD_LIMIT)
            cond_text = f" (cond {cond * 100:+.1f} %)" if short else ""
            parts.append(f"{model} {easgd * 100:+.1f} %{cond_text}")
        target = f"non-exchange steps' overhead <= 5 % ({world}; under 1 ms a step: <= "
        rows.append((target + "an empty cond's + 2 points)", ", ".join(parts), met))
    return rows


OVERHEAD = """\
Median time per step (3 graphs in 2 fresh processes per world) of SGD, EASGD on steps that
never exchange, and SGD + an empty `tf.cond` on a counter. At mlp-25K's 0.1 ms a step any
op costs several percent: there the gating Switch is judged against the empty cond."""
