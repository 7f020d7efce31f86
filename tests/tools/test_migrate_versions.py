# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Attribute, leave_Name.
"""easgd-migrate's `versions`: one metadata analysis per version of a module, shared.

The passes of the tool read the same tree again and again; these tests check that they
share its wrapper, that a transformer which changes nothing leaves the tree it read (and
its resolved metadata) in place, that one which changes something gives a new version,
and that `mentions` sees what a pass would. The tool's output staying
the same is checked by every other test of easgd-migrate.
"""

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from tf_contrib_easgd.migrate import versions

SOURCE = "import tensorflow as tf\n\nopt = tf.contrib.opt.ElasticAverageOptimizer(sgd, 2)\n"


class _Names(cst.CSTVisitor):
    """Collects the qualified names of every attribute chain."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self):
        super().__init__()
        self.found = set()

    def visit_Attribute(self, node):
        self.found |= {q.name for q in self.get_metadata(QualifiedNameProvider, node)}


class _Rename(cst.CSTTransformer):
    """Renames `old` to `new` wherever it is a name; reads qualified names as a pass does."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self, old, new):
        super().__init__()
        self._old, self._new = old, new

    def leave_Name(self, original_node, updated_node):
        return (
            updated_node.with_changes(value=self._new)
            if updated_node.value == self._old
            else updated_node
        )


def test_every_pass_over_one_tree_shares_its_wrapper():
    module = cst.parse_module(SOURCE)
    wrapper = versions.wrapper(module)
    # The wrapper's copy is the same version: it maps to the same wrapper.
    assert versions.wrapper(wrapper.module) is wrapper
    assert versions.wrapper(module) is wrapper
    # An equal tree parsed again is another version.
    assert versions.wrapper(cst.parse_module(SOURCE)) is not wrapper


def test_a_parsed_tree_can_be_wrapped_without_its_copy():
    module = cst.parse_module(SOURCE)
    assert versions.wrapper(module, copy=False).module is module
    copied = cst.parse_module(SOURCE)
    assert versions.wrapper(copied).module is not copied


def test_a_transformer_that_changes_nothing_keeps_the_tree_and_its_metadata():
    module = cst.parse_module(SOURCE)
    wrapper = versions.wrapper(module)
    names = _Names()
    wrapper.visit(names)
    assert "tensorflow.contrib.opt.ElasticAverageOptimizer" in names.found
    resolved = wrapper.resolve(QualifiedNameProvider)
    # No name `unused` in the module: every node is rebuilt, but equal.
    same = versions.transform(module, _Rename("unused", "other"))
    assert same is wrapper.module
    assert versions.wrapper(same) is wrapper
    assert versions.wrapper(same).resolve(QualifiedNameProvider) is resolved


def test_a_transformer_that_changes_the_tree_gives_a_new_version():
    module = cst.parse_module(SOURCE)
    wrapper = versions.wrapper(module)
    renamed = versions.transform(module, _Rename("sgd", "momentum"))
    assert renamed.code == SOURCE.replace("sgd", "momentum")
    assert versions.wrapper(renamed) is not wrapper
    assert versions.code(renamed) == renamed.code


def test_code_is_the_modules_text_and_mentions_finds_substrings_of_names():
    module = cst.parse_module(SOURCE)
    assert versions.code(module) == SOURCE
    assert versions.mentions(module, ["nothing", "contrib"])
    assert versions.mentions(module, ["ElasticAverage"])  # Part of a name is enough.
    assert not versions.mentions(module, ["estimator", "tpu"])


def test_old_versions_are_let_go():
    first = cst.parse_module(SOURCE)
    versions.wrapper(first)
    for index in range(3 * versions._KEPT):
        versions.wrapper(cst.parse_module(f"x = {index}\n"))
    # Only the last few versions are kept: the first has a new wrapper now.
    kept = {id(tree) for version in versions._versions.values() for tree in version.modules}
    assert id(first) not in kept
