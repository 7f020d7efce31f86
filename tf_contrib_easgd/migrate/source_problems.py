"""Sources easgd-migrate cannot migrate, and what to tell the user about them.

A helper of `tf_contrib_easgd.migrate.cli`: Python 2 sources (recognised from Python's own
parser, which names the line and cause precisely), tabs mixed with spaces, and the empty
files a failed `tf_upgrade_v2` leaves, each with the commands that convert the original.
"""

import ast
import re


def _steps(original, output):
    """The commands that take the Python 2 script `original` through both tools to `output`."""
    return (
        "Convert it to Python 3 first (tabs expanded as Python 2 read them; lib2to3 ships with "
        "Python 3.11 and 3.12), then run the tools again, in this order:\n"
        f"    expand -i -t 8 {original} > {original}.new && mv {original}.new {original}\n"
        f"    python3.12 -m lib2to3 -w -n {original}\n"
        f"    tf_upgrade_v2 --infile {original} --outfile {output}\n"
        f"    easgd-migrate {output}"
    )


# SyntaxError messages, and source patterns behind a bare "invalid syntax", of Python 2 code.
_PY2_MESSAGES = (
    "Missing parentheses in call to",
    "multiple exception types must be parenthesized",
    "leading zeros in decimal integer literals",
)
_PY2_SOURCE = re.compile(r"`|<>|\bur['\"]|^\s*raise\s+[\w.]+\s*,|\b\d+[lL]\b")


class MigrationError(Exception):
    """A file easgd-migrate cannot migrate.

    Attributes:
        line: the line of the file the problem is on.
        message: what is wrong and what to do about it.
    """

    def __init__(self, line, message):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


def compile_problem(path, source):
    """Compiles `source` with Python's own parser, which names the line and cause precisely.

    libcst reports a tokenizer error such as tabs mixed with spaces at 1:1, and accepts some
    Python 2 forms (`except E, e:`) that Python 3 refuses.

    Returns:
        (a `MigrationError` saying what is wrong and what to do, or None when the source
        compiles; whether it looks like Python 2 source).
    """
    steps = _steps(path, path)
    try:
        compile(source, str(path), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except TabError as tab:
        message = (
            "tabs and spaces are mixed in the indentation, which Python 2 accepted and "
            f"Python 3 refuses: this looks like Python 2 source. {steps}"
        )
        return MigrationError(tab.lineno or 1, message), True
    except SyntaxError as syntax:
        line = syntax.lineno or 1
        lines = source.splitlines()
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        if any(clue in syntax.msg for clue in _PY2_MESSAGES) or _PY2_SOURCE.search(text):
            message = f"this looks like Python 2 source ({syntax.msg}). {steps}"
            return MigrationError(line, message), True
        return MigrationError(line, f"not valid Python 3: {syntax.msg}."), False
    except ValueError as value:  # Null bytes.
        return MigrationError(1, f"not Python source: {value}."), False
    return None, False


def empty_file_error(path):
    return MigrationError(
        1,
        "the file is empty. tf_upgrade_v2 writes an empty output file when it fails to parse "
        'its input (its report.txt says "ERROR: Failed to parse."), as for Python 2 source '
        "or tabs mixed with spaces in the indentation: the script to convert is the ORIGINAL "
        f"it was given, not this output. {_steps('ORIGINAL', path)}",
    )
