"""The chief's checkpoints in `--model_dir`: which one restores, and the fallback.

`choose` finds the checkpoint the chief can restore: the one the index file `checkpoint`
names, else the newest good one before it; `fall_back` renames the bad ones' files (suffix
`.unusable`) and points the index file at it. `index_problem` checks without TensorFlow that
a checkpoint's files are there (the local launcher's check); `content_problem` reads every
tensor with TensorFlow's reader, which verifies their checksums; the chief checks with both
(`full_problem`). docs/DESIGN.md, "The trainer's task lifecycle" (the model_dir).
"""

import ast
import dataclasses
import glob
import os
import re

from tf_contrib_easgd.trainer import files

#: TensorFlow's index file of a checkpoint directory.
STATE_FILE = "checkpoint"
#: What the files of a checkpoint that does not restore are renamed to end with.
UNUSABLE_SUFFIX = ".unusable"

_STEP = re.compile(r"-(\d+)$")
_STATE_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$")
_PATH_FIELDS = ("model_checkpoint_path", "all_model_checkpoint_paths")
_NUMBER_FIELDS = ("all_model_checkpoint_timestamps", "last_preserved_timestamp")


@dataclasses.dataclass(frozen=True)
class Problem:
    """Why a checkpoint (or the index file) cannot be used.

    Attributes:
        checkpoint: the checkpoint's path prefix, or the index file's path.
        path: the file at fault.
        reason: what is wrong with it.
    """

    checkpoint: str
    path: str
    reason: str

    def __str__(self):
        return f"{self.path}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class Choice:
    """What the chief can restore from a directory.

    Attributes:
        model_dir: the directory.
        restore: the checkpoint to restore (path prefix), or None to start from scratch.
        problems: the checkpoints tried before `restore` that do not restore, newest first.
        state_problem: the `Problem` of an index file that cannot be read, or None.
        keep_listed: the good checkpoints of the index file older than `restore`, oldest
            first: the index file keeps listing them after a fallback.
    """

    model_dir: str
    restore: str | None
    problems: tuple = ()
    state_problem: Problem | None = None
    keep_listed: tuple = ()

    @property
    def ok(self):
        """Whether TensorFlow may restore as it would by itself: nothing is wrong."""
        return not self.problems and self.state_problem is None

    def _bad(self):
        return "; ".join(str(p) for p in (self.state_problem, *self.problems) if p is not None)

    def failure_message(self):
        """The error when nothing restores: each bad file, and what the user can do."""
        return (
            f"--model_dir={self.model_dir!r}: no checkpoint there restores: {self._bad()}. "
            "Nothing in the directory was changed; move the bad files away to start from "
            "scratch there, or give another --model_dir."
        )

    def unmovable_message(self, error):
        """The error when `fall_back` could not rename or write a file: `error`."""
        return (
            f"--model_dir={self.model_dir!r}: the latest checkpoint cannot be used "
            f"({self._bad()}), and falling back to {self.restore} failed: {error}."
        )

    def fallback_message(self, renamed=()):
        """The warning of a fallback: each bad file, the checkpoint restored, what moved.

        Args:
            renamed: the `(old path, new path)` pairs `fall_back` returned.
        """
        what = [f"checkpoint {p.checkpoint}" for p in self.problems]
        if self.state_problem is not None:
            what.insert(0, f"the index file {self.state_problem.path}")
        moved = ", ".join(f"{os.path.basename(a)} -> {os.path.basename(b)}" for a, b in renamed)
        return (
            f"{' and '.join(what)} cannot be used: {self._bad()}. Restoring the "
            f"{'previous' if self.problems else 'newest'} good checkpoint {self.restore} instead"
            + (f"; renamed, not deleted: {moved}" if moved else "")
            + f"; {os.path.join(self.model_dir, STATE_FILE)} now names "
            f"{os.path.basename(self.restore)}."
        )


def checkpoint_step(prefix):
    """The global step in the name of checkpoint `prefix` (`model.ckpt-<step>`), or None."""
    match = _STEP.search(os.path.basename(prefix))
    return int(match.group(1)) if match else None


def read_state(model_dir):
    """Reads the index file `checkpoint` of `model_dir`.

    Returns:
        `(latest, listed)`: the path prefixes it names, absolute (`latest` may be None), or
        None when there is no index file.

    Raises:
        ValueError: if the file cannot be read or is not an index file.
    """
    try:
        with open(_state_path(model_dir), encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot be read ({error})") from None
    values = {field: [] for field in _PATH_FIELDS}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _STATE_LINE.match(line)
        field, value = match.groups() if match else (None, None)
        if field in _PATH_FIELDS:
            values[field].append(_unquote(value, number))
        elif field not in _NUMBER_FIELDS or not _is_number(value):
            raise ValueError(f"line {number} is not part of a checkpoint index file: {line!r}")
    if len(values["model_checkpoint_path"]) > 1:
        raise ValueError("names model_checkpoint_path more than once")
    absolute = [os.path.join(model_dir, p) for p in values["model_checkpoint_path"]]
    listed = [os.path.join(model_dir, p) for p in values["all_model_checkpoint_paths"]]
    return (absolute[0] if absolute else None), listed


def _unquote(value, number):
    """The string of a quoted text-format value, escapes resolved."""
    if len(value) < 2 or value[0] not in "\"'" or value[-1] != value[0]:
        raise ValueError(f"line {number}: {value!r} is not a quoted path")
    try:
        return ast.literal_eval("b" + value).decode("utf-8")
    except (SyntaxError, ValueError):
        try:
            return ast.literal_eval(value)
        except (SyntaxError, ValueError):
            raise ValueError(f"line {number}: {value!r} is not a quoted path") from None


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_state(model_dir, latest, listed):
    """Writes the index file naming `latest` (also listed last), as TensorFlow writes it
    (`files.write_atomically`); paths in `model_dir` relative to it."""

    def shown(prefix):
        relative = os.path.relpath(prefix, model_dir)
        return prefix if relative.startswith(os.pardir) else relative

    paths = [p for p in listed if p != latest] + [latest]
    lines = [f"model_checkpoint_path: {_quote(shown(latest))}"]
    lines += [f"all_model_checkpoint_paths: {_quote(shown(p))}" for p in paths]
    files.write_atomically(_state_path(model_dir), "\n".join(lines) + "\n")


def _quote(path):
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _checkpoints_on_disk(model_dir):
    """The path prefixes of the checkpoints in `model_dir` that have an index."""
    pattern = os.path.join(glob.escape(model_dir), files.CHECKPOINT_PREFIX + "-*.index")
    prefixes = [path[: -len(".index")] for path in glob.glob(pattern)]
    return [p for p in prefixes if checkpoint_step(p) is not None]


def choose(model_dir, check=None):
    """Finds the checkpoint of `model_dir` the chief can restore.

    The one the index file names, if it passes `check`; else the newest good one before it
    (by global step), from the index file or the directory; with an unreadable index file
    (or none, next to checkpoints), the newest good one in the directory.

    Args:
        model_dir: the directory.
        check: `check(prefix)` returns a `Problem` or None; default `index_problem`.

    Returns:
        A `Choice`.
    """
    check = check or index_problem
    state_problem = None
    try:
        state = read_state(model_dir)
    except ValueError as error:
        path = _state_path(model_dir)
        state, state_problem = None, Problem(path, path, str(error))
    on_disk = _checkpoints_on_disk(model_dir)
    latest, listed = state or (None, [])
    if state_problem is None and latest is None and on_disk:
        state_problem = Problem(
            _state_path(model_dir),
            _state_path(model_dir),
            "no index file names a latest checkpoint, but the directory holds "
            + ", ".join(sorted(map(os.path.basename, on_disk), key=checkpoint_step)),
        )
    if latest is None and state_problem is None:
        return Choice(model_dir, None)
    problems = []
    if latest is not None:
        problem = check(latest)
        if problem is None:
            return Choice(model_dir, latest)
        problems.append(problem)
    for candidate in _older_candidates(latest, listed, on_disk):
        problem = check(candidate)
        if problem is None:
            step = checkpoint_step(candidate)
            keep = [p for p in listed if p != candidate and (checkpoint_step(p) or 0) < step]
            return Choice(model_dir, candidate, tuple(problems), state_problem, tuple(keep))
        problems.append(problem)
    return Choice(model_dir, None, tuple(problems), state_problem)


def _state_path(model_dir):
    return os.path.join(model_dir, STATE_FILE)


def _older_candidates(latest, listed, on_disk):
    """The checkpoints to try after `latest`, newest first: with a step up to its step."""
    limit = checkpoint_step(latest) if latest is not None else None
    seen, candidates = {latest}, []
    for prefix in [*listed, *on_disk]:
        step = checkpoint_step(prefix)
        if prefix in seen or step is None or (limit is not None and step > limit):
            continue
        seen.add(prefix)
        candidates.append(prefix)
    return sorted(candidates, key=checkpoint_step, reverse=True)


def fall_back(choice):
    """Makes `choice.restore` the latest checkpoint: renames the bad ones, rewrites the index.

    Each file of a checkpoint in `choice.problems` (and an unreadable index file) is renamed
    to end with `UNUSABLE_SUFFIX` (`.unusable-2`, ... if that name is taken): nothing is
    deleted, and no later save of the same global step overwrites them.

    Returns:
        The `(old path, new path)` of each file renamed.
    """
    renamed = []
    bad_files = [
        path
        for problem in choice.problems
        # Only here can a later save overwrite them: a checkpoint the index file names in
        # another directory is left alone.
        if os.path.dirname(problem.checkpoint) == os.path.normpath(choice.model_dir)
        for path in sorted(glob.glob(glob.escape(problem.checkpoint) + ".*"))
        if not path.endswith(UNUSABLE_SUFFIX) and UNUSABLE_SUFFIX + "-" not in path
    ]
    if choice.state_problem is not None and os.path.exists(choice.state_problem.path):
        bad_files.append(choice.state_problem.path)
    for path in bad_files:
        target, number = path + UNUSABLE_SUFFIX, 1
        while os.path.exists(target):
            number += 1
            target = f"{path}{UNUSABLE_SUFFIX}-{number}"
        os.rename(path, target)
        renamed.append((path, target))
    write_state(choice.model_dir, choice.restore, choice.keep_listed)
    return renamed


def index_problem(prefix):
    """Checks checkpoint `prefix` without TensorFlow: its index and data files are there.

    What they hold is checked by `content_problem`, with TensorFlow's reader.

    Returns:
        A `Problem` naming the file at fault, or None.
    """
    index = prefix + ".index"
    if not os.path.exists(index):
        if glob.glob(glob.escape(prefix) + ".*"):
            return Problem(prefix, index, "is missing (the index of the checkpoint)")
        return Problem(prefix, index, "does not exist, nor any other file of the checkpoint")
    data_files = glob.glob(glob.escape(prefix) + ".data-?????-of-?????")
    if not data_files:
        return Problem(prefix, f"{prefix}.data-00000-of-00001", _MISSING_DATA)
    num_shards = int(data_files[0][-5:])
    for shard in range(num_shards):
        data = f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"
        if not os.path.exists(data):
            return Problem(prefix, data, _MISSING_DATA)
    return None


_MISSING_DATA = "is missing (a data file of the checkpoint)"


def content_problem(prefix):
    """Reads every tensor of checkpoint `prefix` with TensorFlow, which checks their CRCs.

    Returns:
        A `Problem`, or None.
    """
    import tensorflow as tf  # noqa: PLC0415 (the launcher checks without TensorFlow)

    try:
        reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    except Exception as error:  # noqa: BLE001 (OpErrors, and the wrapper's RuntimeError)
        return Problem(prefix, prefix + ".index", _first_line(error))
    pattern = glob.escape(prefix) + ".data-?????-of-?????"
    data_files = ", ".join(sorted(glob.glob(pattern))) or prefix
    for name in sorted(reader.get_variable_to_shape_map()):
        try:
            reader.get_tensor(name)
        except Exception as error:  # noqa: BLE001 (as above)
            return Problem(prefix, data_files, f"tensor {name!r}: {_first_line(error)}")
    return None


def full_problem(prefix):
    """`index_problem`, then `content_problem`: what the chief checks."""
    return index_problem(prefix) or content_problem(prefix)


def _first_line(error):
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(error).__name__
