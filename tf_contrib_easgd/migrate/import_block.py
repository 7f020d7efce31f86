"""The statements a migrated module gains after its first block of imports.

A helper of `tf_contrib_easgd.migrate.codemod`: the `import tf_contrib_easgd` and
`import tensorflow` the rewrites need and, in a script that builds TF1 graphs, the
`disable_v2_behavior()` call, with the blank lines and comments around them kept tidy.
"""

import libcst as cst
import libcst.matchers

from tf_contrib_easgd.migrate.contrib_names import PACKAGE


def insert_after_imports(module, facts, needs):
    """Adds the imports the rewrite needs and, for graph scripts, the TF1 mode switch.

    The imports go at the end of the first block of imports (after the docstring if there is
    none); the switch after them, and after the import that binds the name it uses.

    Args:
        module: a `libcst.Module`.
        facts: its `module_facts.Facts`.
        needs: the `tf1_apis.ImportNeeds` of the rewrites.

    Returns:
        The module, changed or not.
    """
    # Spelled first: the switch may be what needs `import tensorflow`.
    prefix = needs.compat_v1() if _needs_mode_switch(facts) else None
    imports = _needed_imports(module, needs)
    body = list(module.body)
    end = _end_of_first_imports(body)
    if imports:
        body = _insert(body, end, imports)
        end += len(imports)
    if prefix is not None:
        root = prefix.split(".")[0]
        bound = [i + 1 for i, statement in enumerate(body) if _binds(statement, root)]
        body = _insert(body, max([end, *bound[:1]]), [_mode_switch(module, prefix)])
    return module.with_changes(body=body) if imports or prefix is not None else module


def add_imports(module, texts):
    """Returns `module` with the import statements `texts` at the end of its first imports.

    A statement already there, spelled the same, is not added again.
    """
    present = {module.code_for_node(statement).strip() for statement in module.body}
    statements = [
        cst.parse_statement(text, config=module.config_for_parsing)
        for text in texts
        if text not in present
    ]
    if not statements:
        return module
    body = list(module.body)
    return module.with_changes(body=_insert(body, _end_of_first_imports(body), statements))


def _needs_mode_switch(facts):
    """Whether the module is a script that builds TF1 graphs and picks no mode itself."""
    return facts.is_script and facts.builds_graphs and not facts.picks_mode


def _mode_switch(module, compat_v1):
    """The `<compat_v1>.disable_v2_behavior()` statement, a blank line above it."""
    switch = cst.parse_statement(
        f"{compat_v1}.disable_v2_behavior()", config=module.config_for_parsing
    )
    return switch.with_changes(leading_lines=[cst.EmptyLine()])


def _needed_imports(module, needs):
    """The `import tf_contrib_easgd` and `import tensorflow` statements the rewrites need."""
    return [
        cst.parse_statement(f"import {name}", config=module.config_for_parsing)
        for name, needed in ((PACKAGE, needs.package), ("tensorflow", needs.tensorflow))
        if needed
    ]


def _end_of_first_imports(body):
    """The index in `body` after the first block of imports (after the docstring, if any)."""
    end = 1 if body and _is_docstring(body[0]) else 0
    while end < len(body) and _is_import_line(body[end]):
        end += 1
    return end


def _is_import_line(statement):
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
    )


def _is_docstring(statement):
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )


def _binds(statement, name):
    """Whether a top-level `statement` (or a block inside it) imports something as `name`."""
    if isinstance(statement, cst.FunctionDef | cst.ClassDef):
        return False
    for node in libcst.matchers.findall(statement, libcst.matchers.Import()):
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name.split(".")[0]) == name:
                return True
    for node in libcst.matchers.findall(statement, libcst.matchers.ImportFrom()):
        if not isinstance(node.names, cst.ImportStar) and any(
            (alias.evaluated_alias or alias.evaluated_name) == name for alias in node.names
        ):
            return True
    return False


def _insert(body, index, statements):
    """Returns `body` with `statements` before `body[index]`, keeping the lines around tidy.

    A blank line goes after them when the last one has lines above it; at the top of the
    module, the comments of the first statement stay on top.
    """
    rest = list(body[index:])
    if rest and statements[-1].leading_lines:  # Set apart: a blank line after it too.
        first = rest[0]
        if not first.leading_lines or first.leading_lines[0].comment is not None:
            rest[0] = first.with_changes(leading_lines=[cst.EmptyLine(), *first.leading_lines])
    if index == 0 and rest:
        first = statements[0].with_changes(leading_lines=rest[0].leading_lines)
        statements = [first, *statements[1:]]
        rest[0] = rest[0].with_changes(leading_lines=[cst.EmptyLine()])
    return [*body[:index], *statements, *rest]
