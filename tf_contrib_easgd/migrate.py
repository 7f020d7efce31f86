"""easgd-migrate: moves TF1 scripts from tf.contrib.opt's Elastic Averaging SGD to this package.

Usage:

    easgd-migrate [--dry_run] [--nobackup] PATH...
    python -m tf_contrib_easgd.migrate [--dry_run] [--nobackup] PATH...

Each PATH is a Python file or a directory (searched for `*.py`, skipping hidden folders and
`__pycache__`). A changed file is rewritten in place, its original kept beside it as
`FILE.bak` (an existing `.bak` is never overwritten); `--nobackup` skips that. `--dry_run`
writes nothing and prints a unified diff instead.

What is rewritten is described in `tf_contrib_easgd._codemod`; in short: contrib's EASGD
names through any alias of `tensorflow` or of contrib's modules, `from tensorflow.contrib.opt
import ...` of them, `tf.device(<device function>)` (which TF 2 refuses) and, for a script
that builds graphs, one `tf.compat.v1.disable_v2_behavior()` after the imports. Everything
else TF 2 changed is `tf_upgrade_v2`'s job; run that first, then this tool (both orders
work; see docs/MIGRATING.md). Running the tool twice changes nothing the second time.

Exit status: 0 when everything was converted; 1 when some use could not be (each is listed
on stderr as FILE:LINE: message, lines of the migrated file); 2 on a usage error or a file
that cannot be read or parsed.
"""

import dataclasses
import difflib
import pathlib
import sys

import libcst
from absl import app, flags

from tf_contrib_easgd import _codemod

EXIT_OK = 0
EXIT_UNCONVERTED = 1
EXIT_ERROR = 2

BACKUP_SUFFIX = ".bak"


@dataclasses.dataclass(frozen=True)
class FileResult:
    """What migrating one file did.

    Attributes:
        path: the file.
        old_code: its text before.
        new_code: its text after (equal to `old_code` when nothing changed).
        findings: the `Finding`s of the migration, lines of `new_code`.
        backup: the backup written, or None.
    """

    path: pathlib.Path
    old_code: str
    new_code: str
    findings: tuple
    backup: pathlib.Path | None = None

    @property
    def changed(self):
        """Whether the migration changed the file's text."""
        return self.old_code != self.new_code

    def diff(self):
        """Returns the unified diff from the old text to the new one ('' when unchanged)."""
        return "".join(
            difflib.unified_diff(
                self.old_code.splitlines(keepends=True),
                self.new_code.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


def find_python_files(paths):
    """Expands files and directories into the sorted list of Python files to migrate.

    Args:
        paths: file or directory paths (`str` or `pathlib.Path`).

    Returns:
        A list of `pathlib.Path`, each file once.

    Raises:
        FileNotFoundError: if a path does not exist.
    """
    found = {}
    for path in map(pathlib.Path, paths):
        if path.is_dir():
            for file in sorted(path.rglob("*.py")):
                parts = file.relative_to(path).parts[:-1]
                if not any(p.startswith(".") or p == "__pycache__" for p in parts):
                    found.setdefault(file.resolve(), file)
        elif path.is_file():
            found.setdefault(path.resolve(), path)
        else:
            raise FileNotFoundError(f"PATH {str(path)!r} is neither a file nor a directory.")
    return list(found.values())


def migrate_file(path, dry_run=False, backup=True):
    """Migrates one file in place (unless `dry_run`).

    Args:
        path: the Python file.
        dry_run: compute the result but write nothing.
        backup: before rewriting the file, copy it to `path + ".bak"` unless that exists.

    Returns:
        A `FileResult`.

    Raises:
        OSError: if the file cannot be read or written.
        UnicodeDecodeError: if it is not UTF-8 text.
        libcst.ParserSyntaxError: if it is not valid Python.
    """
    path = pathlib.Path(path)
    raw = path.read_bytes()
    old_code = raw.decode("utf-8")
    migration = _codemod.migrate_source(old_code)
    result = FileResult(path, old_code, migration.code, migration.findings)
    if dry_run or not result.changed:
        return result
    backup_path = None
    if backup:
        candidate = path.with_name(path.name + BACKUP_SUFFIX)
        if not candidate.exists():
            candidate.write_bytes(raw)
            backup_path = candidate
    path.write_bytes(migration.code.encode("utf-8"))
    return dataclasses.replace(result, backup=backup_path)


def run(paths, dry_run=False, backup=True, out=None, err=None):
    """Migrates `paths` and reports to `out` (diffs) and `err` (progress, findings).

    Args:
        paths: files and directories.
        dry_run: print unified diffs to `out` instead of writing.
        backup: keep `FILE.bak` copies of rewritten files.
        out: text stream for diffs; defaults to `sys.stdout`.
        err: text stream for messages; defaults to `sys.stderr`.

    Returns:
        The exit status: `EXIT_OK`, `EXIT_UNCONVERTED` or `EXIT_ERROR`.

    Raises:
        FileNotFoundError: if a path does not exist (nothing is migrated then).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    files = find_python_files(paths)
    status = EXIT_OK
    changed = unconverted = 0
    for path in files:
        try:
            result = migrate_file(path, dry_run=dry_run, backup=backup)
        except (OSError, UnicodeDecodeError, libcst.ParserSyntaxError) as error:
            print(f"{path}: cannot migrate: {error}", file=err)
            status = EXIT_ERROR
            continue
        if result.changed:
            changed += 1
            if dry_run:
                out.write(result.diff())
            else:
                kept = ""
                if result.backup:
                    kept = f" (original kept in {result.backup})"
                elif backup:
                    kept = f" (the older {path}{BACKUP_SUFFIX} was left as it was)"
                print(f"migrated {path}{kept}", file=err)
        for finding in result.findings:
            kind = "not converted" if finding.unconverted else "note"
            print(f"{path}:{finding.line}: {kind}: {finding.message}", file=err)
            if finding.unconverted:
                unconverted += 1
                status = max(status, EXIT_UNCONVERTED)
    verb = "would change" if dry_run else "changed"
    print(
        f"easgd-migrate: {len(files)} file(s) checked, {changed} {verb}, "
        f"{unconverted} use(s) not converted.",
        file=err,
    )
    return status


def _define_flags():
    """Defines the flags when the tool runs (not on import), as the main program's own.

    absl's `--help` lists the flags of the main module and prints its docstring; for the
    `easgd-migrate` console script the main module is a generated wrapper without either.
    """
    main_module = sys.modules.get("__main__")
    if main_module is not None and not main_module.__doc__:
        main_module.__doc__ = __doc__
    if "dry_run" not in flags.FLAGS:
        flags.DEFINE_bool(
            "dry_run", False, "Print a unified diff and write nothing.", module_name=sys.argv[0]
        )
        flags.DEFINE_bool(
            "backup",
            True,
            "Keep the original of each rewritten FILE as FILE.bak (--nobackup: do not).",
            module_name=sys.argv[0],
        )


def _main(argv):
    paths = argv[1:]
    if not paths:
        raise app.UsageError("Give at least one PATH (a Python file or a directory).", EXIT_ERROR)
    try:
        find_python_files(paths)  # Every path is checked before anything is written.
    except FileNotFoundError as error:
        raise app.UsageError(str(error), EXIT_ERROR) from None
    return run(paths, dry_run=flags.FLAGS.dry_run, backup=flags.FLAGS.backup)


def main(argv=None):
    """Entry point of `easgd-migrate` and `python -m tf_contrib_easgd.migrate`.

    Args:
        argv: the command line, program name first; defaults to `sys.argv`.
    """
    _define_flags()
    app.run(_main, argv=argv)


if __name__ == "__main__":
    main()
