# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Call, visit_Comparison.
"""A note where a module reads `global_step` for a stop condition or a learning-rate decay.

A helper of `tf_contrib_easgd.migrate.codemod`. Under EASGD, as under contrib, `global_step`
counts exchanges of all workers, not local steps: W workers of L local steps at period tau
end at W * floor(L / tau). A stop at global step S comes after about S * tau / W local steps
of each worker, and a decay keyed on it runs tau / W times slower than the script meant
(slim's `--max_number_of_steps=40` at tau 10 with 2 workers: about 200 local steps each).
Nothing is rewritten: the note says where, and what to change.
"""

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tf_contrib_easgd.migrate import contrib_names as names
from tf_contrib_easgd.migrate import versions
from tf_contrib_easgd.migrate.contrib_names import Finding

_DECAYS = frozenset(
    f"tensorflow.train.{name}"
    for name in (
        "exponential_decay",
        "piecewise_constant",
        "polynomial_decay",
        "natural_exp_decay",
        "inverse_time_decay",
        "cosine_decay",
        "cosine_decay_restarts",
        "linear_cosine_decay",
        "noisy_linear_cosine_decay",
    )
)
_STOPS = frozenset({"tensorflow.train.StopAtStepHook"})
# tf-slim's Supervisor trainer stops at `number_of_steps` global steps.
_SLIM_TRAIN = frozenset({"tf_slim.learning.train", "tensorflow.contrib.slim.learning.train"})
# What a module's text must contain for a note: a decay, a stop, slim's trainer or a
# name starting `global_step`.
_TRIGGERS = (
    *(name.rpartition(".")[2] for name in _DECAYS),
    *(name.rpartition(".")[2] for name in _STOPS),
    "learning",
    "global_step",
)
NOTE = (
    "reads global_step for a {uses} (line{s} {lines}). Under EASGD global_step counts "
    "exchanges of all workers, not local steps: W workers of L local steps at "
    "communication_period tau end at W * floor(L / tau). A stop at global step S comes after "
    "about S * tau / W local steps of each worker, and a decay keyed on global_step runs "
    "tau / W times slower than on one machine. To keep the old meaning, divide such step "
    "counts by tau / W (StopAtStepHook, max_steps, decay_steps, number_of_steps), or stop "
    "each worker on its own count of local steps (opt.local_step)."
)


def global_step_findings(module):
    """One note for `module` (a migrated `libcst.Module`) listing where it reads global_step
    for a stop condition or a decay; an empty list when it does not."""
    if not versions.mentions(module, _TRIGGERS):
        return []
    visitor = _Uses()
    versions.wrapper(module).visit(visitor)
    if not visitor.lines:
        return []
    kinds = " and a ".join(sorted(visitor.kinds))
    lines = sorted(set(visitor.lines))
    text = NOTE.format(
        uses=kinds, s="s" if len(lines) > 1 else "", lines=", ".join(map(str, lines))
    )
    return [Finding(lines[0], text, unconverted=False)]


class _Uses(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self):
        super().__init__()
        self.lines = []
        self.kinds = set()

    def _add(self, node, kind):
        self.lines.append(self.get_metadata(PositionProvider, node).start.line)
        self.kinds.add(kind)

    def visit_Call(self, node):
        found = names.qualified_names(self, node.func)
        keywords = {arg.keyword.value for arg in node.args if arg.keyword is not None}
        if found & _DECAYS:
            self._add(node, "learning-rate decay")
        elif found & _STOPS or (found & _SLIM_TRAIN and "number_of_steps" in keywords):
            self._add(node, "stop condition")

    def visit_Comparison(self, node):
        ordering = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
        if _reads_global_step(node) and any(
            isinstance(target.operator, ordering) for target in node.comparisons
        ):
            self._add(node, "stop condition")


def _reads_global_step(node):
    """Whether `node` names a global step: a name or attribute that starts `global_step`
    (`global_step`, `self.global_step_value`), not one that only contains it
    (`max_global_steps`, a limit)."""
    identifiers = m.findall(node, m.Name() | m.Attribute())
    return any(
        (n.value if isinstance(n, cst.Name) else n.attr.value).startswith("global_step")
        for n in identifiers
    )
