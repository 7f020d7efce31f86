# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Call.
"""Notes on each converted optimizer that keeps contrib's defaults: what they cost.

A helper of `tf_contrib_easgd.migrate.codemod`. A migrated script keeps contrib's
`moving_rate` and `rho` defaults, and trains exactly as it did; each
`ElasticAverageOptimizer(...)` that leaves either out gets one note saying what those
defaults cost on the measurements of docs/TUNING.md and what to pass instead. Nothing is
rewritten.
"""

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import PACKAGE, Finding

_OPTIMIZER = f"{PACKAGE}.ElasticAverageOptimizer"
# ElasticAverageOptimizer(opt, num_worker, ea_custom_getter, communication_period,
# moving_rate, rho, ...): the positions of the two arguments with contrib's defaults.
_DEFAULTED = {"moving_rate": 4, "rho": 5}
_COSTS = {
    "moving_rate": "moving_rate=None (0.9 / communication_period / num_worker: the centre "
    "follows the workers communication_period times more slowly than the paper's)",
    "rho": "rho=None (moving_rate / learning_rate: a pull towards a stale centre at every "
    "step, which momentum multiplies and adaptive optimizers rescale)",
}
# What docs/TUNING.md's grid (the embedded digits, 2 workers, period 10) measured of each.
_MEASURED = {
    "moving_rate": "the paper's moving rate reached 97 % test accuracy in about 0.6 x the "
    "local steps",
    "rho": "with the default rho no run reached 97 %",
}
_ALTERNATIVES = {"moving_rate": "moving_rate=0.9 / num_worker", "rho": "rho=0.0"}


def default_findings(module):
    """A note for each call of this package's `ElasticAverageOptimizer` in `module` (a
    migrated `libcst.Module`) that leaves `moving_rate` or `rho` to contrib's default."""
    if not versions.mentions(module, ["ElasticAverageOptimizer"]):
        return []
    visitor = _OptimizerCalls()
    versions.wrapper(module).visit(visitor)
    return visitor.findings


class _OptimizerCalls(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self):
        super().__init__()
        self.findings = []

    def visit_Call(self, node):
        names = {q.name for q in self.get_metadata(QualifiedNameProvider, node.func, set())}
        if _OPTIMIZER not in names or any(arg.star for arg in node.args):
            return
        positional = sum(1 for arg in node.args if arg.keyword is None)
        keywords = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        left = [
            name
            for name, position in _DEFAULTED.items()
            if name not in keywords and positional <= position
        ]
        if not left:
            return
        line = self.get_metadata(PositionProvider, node).start.line
        self.findings.append(Finding(line, _note(left), unconverted=False))


def _note(left):
    costs = "; ".join(_COSTS[name] for name in left)
    measured = "; ".join(_MEASURED[name] for name in left)
    alternatives = ", ".join(_ALTERNATIVES[name] for name in left)
    return (
        f"keeps contrib's {costs}, so it trains exactly as it did. Measured on the digits "
        f"(docs/TUNING.md): {measured}. For a new run pass {alternatives} (where the network "
        "is the bottleneck, also overlap=True and wire_dtype=tf.bfloat16: BENCHMARKS.md)."
    )
