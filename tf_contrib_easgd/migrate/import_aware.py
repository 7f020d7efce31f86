# ruff: noqa: N802 -- libcst dispatches on the node class names: visit_Import, ...
"""A libcst transformer that knows whether it is inside an import statement.

A helper of the rewrites of `tf_contrib_easgd.migrate`: a name in `import a.b` or
`from a import b` is not a use of it, and the rewrites that rename uses leave imports to
the passes that split them.
"""

import libcst as cst


class ImportAwareTransformer(cst.CSTTransformer):
    """A `CSTTransformer` whose `in_import` says whether the node visited is in an import.

    Subclasses that override `leave_Import` or `leave_ImportFrom` call this class's first.
    """

    def __init__(self):
        super().__init__()
        self._import_depth = 0

    @property
    def in_import(self):
        """Whether the node being visited lies in an `import` or `from ... import`."""
        return self._import_depth > 0

    def visit_Import(self, node):
        self._import_depth += 1

    def leave_Import(self, original_node, updated_node):
        self._import_depth -= 1
        return updated_node

    def visit_ImportFrom(self, node):
        self._import_depth += 1

    def leave_ImportFrom(self, original_node, updated_node):
        self._import_depth -= 1
        return updated_node
