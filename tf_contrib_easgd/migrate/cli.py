"""easgd-migrate: moves TF1 scripts from tf.contrib.opt's Elastic Averaging SGD to this package.

Usage:

    easgd-migrate [--dry_run] [--nobackup] [--keep_tf_session] PATH...
    python -m tf_contrib_easgd.migrate [--dry_run] [--nobackup] [--keep_tf_session] PATH...

Each PATH is a Python file or a directory (searched for `*.py`, skipping hidden folders and
`__pycache__`). A changed file is rewritten in place (through a temporary file in the same
folder, so it is never left half-written), its original kept beside it as `FILE.bak` (an
existing `.bak` is never overwritten); `--nobackup` skips that. `--dry_run` writes nothing
and prints a unified diff instead; findings are listed either way.

Every file given is read before any is rewritten: a module's star imports from the tree,
the modules it imports and those importing it decide what it needs (`project`). What is
rewritten, and why, is in docs/DESIGN.md ("The migration tool"); in short: contrib's EASGD
names through any alias of `tensorflow` or of contrib's modules, a star import of the tree
or a local copy of contrib's module; `tf.contrib.slim` as the tf-slim package;
`tf.device(<device function>)` (which TF 2 refuses); `tf.layers`, and `tf.keras` in graph
code, with the Keras 2 switch they need (in the script that imports them); in modules that
build TF1 graphs or graph ops for a module using EASGD, `tf.Variable`, TF1's `tf.summary`
ops, TF1's integer `resize` methods and, for a script, one
`tf.compat.v1.disable_v2_behavior()` after the imports; in any module,
`draw_bounding_boxes` without colors and the Estimator names that TensorFlow 2.16's and
later `tf_upgrade_v2` no longer converts; and, in modules that use EASGD, TensorFlow's
`MonitoredTrainingSession`, which becomes this package's (its chief keeps a living centre
instead of restoring a checkpoint over it; `--keep_tf_session` keeps TensorFlow's).
Everything else TF 2 changed is `tf_upgrade_v2`'s job. Convert Python 2 sources to Python 3
first, run `tf_upgrade_v2` next, then this tool (see docs/MIGRATING.md). Running the tool
twice changes nothing the second time.

The last line counts the files checked and changed, the uses not converted and the files
not migrated at all. Exit status: 0 when everything was converted (and after the help:
--help, -h, --helpshort, --helpfull); 1 when some use could not be (each is listed on
stderr as FILE:LINE: message, lines of the migrated file, with the hand edit to make); 2
on a usage error or a file that cannot be read or parsed (Python 2 sources, tabs mixed with
spaces and the empty files tf_upgrade_v2 leaves when it fails are explained).
"""

import contextlib
import dataclasses
import difflib
import os
import pathlib
import shutil
import sys
import tempfile

import libcst
from absl import app, flags

from tf_contrib_easgd.migrate import codemod, project, source_problems
from tf_contrib_easgd.migrate.source_problems import MigrationError

EXIT_OK = 0
EXIT_UNCONVERTED = 1
EXIT_ERROR = 2

BACKUP_SUFFIX = ".bak"


def _write_atomically(path, data, mode_of):
    """Writes `data` to `path` via a temporary file in the same folder and `os.replace`.

    Args:
        path: the file to write (replaced whole, or not at all).
        data: the bytes.
        mode_of: an existing file whose permission bits the new file gets.
    """
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        shutil.copymode(mode_of, temporary)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


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


def migrate_file(path, dry_run=False, backup=True, keep_tf_session=False, context=None):
    """Migrates one file in place (unless `dry_run`).

    Args:
        path: the Python file.
        dry_run: compute the result but write nothing.
        backup: before rewriting the file, copy it to `path + ".bak"` unless that exists.
        keep_tf_session: keep TensorFlow's `MonitoredTrainingSession` (`codemod`).
        context: what the rest of its tree tells about it (`project.contexts`), or None.

    Returns:
        A `FileResult`.

    Raises:
        OSError: if the file cannot be read or written.
        UnicodeDecodeError: if it is not UTF-8 text.
        MigrationError: if it is not valid Python 3 (the message says how to convert Python 2
            code), or it is empty (what tf_upgrade_v2 leaves when it fails) and not an
            `__init__.py`.
    """
    path = pathlib.Path(path)
    raw = path.read_bytes()
    old_code = raw.decode("utf-8")
    if not raw and path.name != "__init__.py":
        raise source_problems.empty_file_error(path)
    problem, python2 = source_problems.compile_problem(path, old_code)
    if python2:
        raise problem
    try:
        migration = codemod.migrate_source(
            old_code, keep_tf_session=keep_tf_session, context=context
        )
    except libcst.ParserSyntaxError as error:
        # When both fail, Python's message is the clearer one. Python failing alone (on
        # syntax newer than this interpreter's) does not stop the migration.
        detail = f"libcst cannot parse it: {error.message}."
        raise problem or MigrationError(error.raw_line, detail) from error
    result = FileResult(path, old_code, migration.code, migration.findings)
    if dry_run or not result.changed:
        return result
    target = path.resolve()  # A symbolic link stays one; the file it points at changes.
    backup_path = None
    if backup:
        candidate = path.with_name(path.name + BACKUP_SUFFIX)
        if not candidate.exists():
            _write_atomically(candidate, raw, mode_of=target)
            backup_path = candidate
    _write_atomically(target, migration.code.encode("utf-8"), mode_of=target)
    return dataclasses.replace(result, backup=backup_path)


def run(paths, dry_run=False, backup=True, out=None, err=None, keep_tf_session=False):
    """Migrates `paths` and reports to `out` (diffs) and `err` (progress, findings).

    Args:
        paths: files and directories.
        dry_run: print unified diffs to `out` instead of writing.
        backup: keep `FILE.bak` copies of rewritten files.
        out: text stream for diffs; defaults to `sys.stdout`.
        err: text stream for messages; defaults to `sys.stderr`.
        keep_tf_session: keep TensorFlow's `MonitoredTrainingSession` (`codemod`).

    Returns:
        The exit status: `EXIT_OK`, `EXIT_UNCONVERTED` or `EXIT_ERROR`.

    Raises:
        FileNotFoundError: if a path does not exist (nothing is migrated then).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    files = find_python_files(paths)
    roots = [path for path in map(pathlib.Path, paths) if path.is_dir()]
    contexts = project.contexts(files, roots)  # The whole tree, read before any rewrite.
    status = EXIT_OK
    changed = unconverted = failed = 0
    for path in files:
        try:
            result = migrate_file(
                path,
                dry_run=dry_run,
                backup=backup,
                keep_tf_session=keep_tf_session,
                context=contexts[path],
            )
        except MigrationError as error:
            print(f"{path}:{error.line}: cannot migrate: {error.message}", file=err)
            status, failed = EXIT_ERROR, failed + 1
            continue
        except (OSError, UnicodeDecodeError) as error:
            print(f"{path}: cannot migrate: {error}", file=err)
            status, failed = EXIT_ERROR, failed + 1
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
        f"{unconverted} use(s) not converted, {failed} file(s) not migrated at all.",
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
        flags.DEFINE_bool(
            "keep_tf_session",
            False,
            "Keep TensorFlow's MonitoredTrainingSession in files that use EASGD. By default it "
            "becomes tf_contrib_easgd.MonitoredTrainingSession (same arguments), whose chief "
            "keeps the centre the parameter servers hold instead of restoring its latest "
            "checkpoint over it at every session rebuild.",
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
    return run(
        paths,
        dry_run=flags.FLAGS.dry_run,
        backup=flags.FLAGS.backup,
        keep_tf_session=flags.FLAGS.keep_tf_session,
    )


def _with_help_as_absl_spells_it(argv):
    """Returns `argv` with each `-h` before any `--` replaced by `--help`, absl's name."""
    argv = list(argv)
    end = argv.index("--") if "--" in argv else len(argv)
    return argv[:1] + ["--help" if arg == "-h" else arg for arg in argv[1:end]] + argv[end:]


def _parse_flags(argv):
    """Parses the flags as absl's `app.run` does, but the help exits with status 0.

    absl's help flags (`--help`, `-?`, `--helpshort`, `--helpfull`, `--helpxml`; `-h` is
    read as `--help`) print the help and exit with status 1, which here means "some use
    could not be converted". They are the only flags that exit while flags are parsed.
    """
    argv = _with_help_as_absl_spells_it(argv)
    try:
        return flags.FLAGS(argv)
    except flags.Error:
        return app.parse_flags_with_usage(argv)  # Reports the bad flag as absl always did.
    except SystemExit as done:
        if done.code == 1:  # absl's exit status after the help.
            sys.exit(0)
        raise


def main(argv=None):
    """Entry point of `easgd-migrate` and `python -m tf_contrib_easgd.migrate`.

    Args:
        argv: the command line, program name first; defaults to `sys.argv`.
    """
    _define_flags()
    app.run(_main, argv=argv, flags_parser=_parse_flags)


if __name__ == "__main__":
    main()
