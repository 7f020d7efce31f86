"""Progress events of easgd-train tasks: how a task reports them, how a launcher reads them.

A task reports what it does as events: `started`, `waiting`, `progress`, `centre`,
`done`, `summary` (the chief's final result), `serving` and `stopped` (a parameter
server). Run by hand, a task prints each event as a line of text. Run by the local
launcher (`--progress_format=json`), it prints one JSON object per line after the marker
`EVENT_PREFIX`, which the launcher reads (`tf_contrib_easgd.runner.display`). TensorFlow is
not needed here.
"""

import json
import statistics
import sys
import time

#: The marker in front of a JSON event line.
EVENT_PREFIX = "@easgd-event "

TEXT = "text"
JSON = "json"
FORMATS = (TEXT, JSON)


class Reporter:
    """Prints the events of one task, as text or as JSON lines.

    Args:
        task: the task's name, e.g. `"worker 1"`.
        fmt: `"text"` or `"json"`.
        stream: where to print; defaults to `sys.stdout` at the time of each event.

    Raises:
        ValueError: if `fmt` is neither `"text"` nor `"json"`.
    """

    def __init__(self, task, fmt=TEXT, stream=None):
        if fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {list(FORMATS)}, got {fmt!r}.")
        self._task = task
        self._format = fmt
        self._stream = stream

    def event(self, kind, **fields):
        """Prints event `kind` with `fields` (JSON-serialisable values)."""
        event = {"event": kind, "task": self._task, "time": time.time(), **fields}
        line = EVENT_PREFIX + json.dumps(event) if self._format == JSON else format_event(event)
        print(line, file=self._stream or sys.stdout, flush=True)


class Window:
    """The local steps of a worker since its last "progress" event: from which step, since
    when, and their losses (`losses.append` each)."""

    def __init__(self, step):
        self.step, self.time, self.losses = step, time.monotonic(), []

    def report(self, reporter, step, steps, distance, exchanges):
        """Reports "progress" at `step` of `steps`: the mean loss and the speed since the
        window began, the elastic `distance` and the `exchanges` so far; then begins the
        next window at `step`.

        Returns:
            `(mean loss, steps per second)`.
        """
        now = time.monotonic()
        loss = statistics.fmean(self.losses)
        rate = (step - self.step) / max(now - self.time, 1e-9)
        reporter.event(
            "progress", step=step, steps=steps, loss=loss, distance=float(distance),
            steps_per_sec=rate, exchanges=int(exchanges),
        )  # fmt: skip
        self.step, self.time, self.losses = step, now, []
        return loss, rate


def format_event(event):
    """Returns one line of text for `event`."""
    event = {"task": "?", **event}
    text = _TEXT.get(event.get("event"))
    if text is not None:
        return text(event)
    other = {key: value for key, value in event.items() if key not in ("task", "time")}
    return f"{event['task']}: {event.get('event')} {json.dumps(other)}"


def summary_line(summary):
    """Returns the final one-line summary of a job from its summary dict."""
    steps = summary.get("local_steps", {})
    wall = summary.get("wall_secs", summary.get("chief_secs"))
    return (
        f"easgd-train: centre test accuracy {summary['test_accuracy']:.4f} on "
        f"{summary['test_examples']} {summary['dataset']} test images | "
        f"{summary['num_workers']} worker{'s' if summary['num_workers'] != 1 else ''}, "
        f"local steps {list(steps.values())} | "
        f"{summary['exchanges']} exchanges | wall time {wall:.1f} s | "
        f"model_dir {summary['model_dir']}"
    )


_TEXT = {
    "progress": lambda e: (
        f"{e['task']}: step {e['step']}/{e['steps']}  loss {e['loss']:.4f}  elastic distance "
        f"{e['distance']:.4f}  {e['steps_per_sec']:.1f} steps/s  exchanges {e['exchanges']}"
    ),
    "centre": lambda e: (
        f"{e['task']}: centre at local step {e['step']}: test accuracy {e['accuracy']:.4f}, "
        f"test loss {e['loss']:.4f}"
    ),
    "started": lambda e: (
        f"{e['task']}: session ready "
        + (
            f"again {e['recovery_secs']:.1f} s after losing a task"
            if e.get("recovery_secs") is not None
            else f"after {e['startup_secs']:.1f} s"
        )
        + f" at local step {e.get('step', 0)}, {e.get('global_step', 0)} exchanges so far"
        + (f" (exchange transport: {e['transport']})" if e.get("transport") else "")
    ),
    "recovering": lambda e: (
        f"{e['task']}: lost a task at local step {e['step']} ({e['error']}); waiting for it "
        "to come back"
    ),
    "stalled": lambda e: (
        f"{e['task']}: local step {e['step']} has waited {e['secs']:.0f} s for the parameter "
        "servers ("
        + (
            f"no connection to {', '.join(e['unreachable'])}: a cut link?"
            if e["unreachable"]
            else "they take connections but do not answer: a frozen or overloaded process?"
        )
        + "); it goes on when they answer"
    ),
    "resumed": lambda e: f"{e['task']}: local step {e['step']} went on after {e['secs']:.1f} s",
    "rejoining": lambda e: (
        f"{e['task']}: local step {e['step']} still waits {e['back_secs']:.1f} s after the "
        f"parameter servers took connections again ({e['secs']:.1f} s in all); restarting "
        "this process to rejoin from the centre"
        if e.get("back_secs") is not None
        else f"{e['task']}: local step {e['step']} has waited {e['secs']:.1f} s on parameter "
        "servers that take connections; restarting this process to rejoin from the centre"
    ),
    "waiting": lambda e: f"{e['task']}: waiting for {e['what']}",
    "done": lambda e: (
        f"{e['task']}: done, {e['steps']} local steps in {e['secs']:.1f} s "
        f"({e['steps_per_sec']:.1f} steps/s)"
    ),
    "summary": summary_line,
    "serving": lambda e: f"{e['task']}: serving at {e['address']}",
    "stopped": lambda e: f"{e['task']}: stopped",
    "warning": lambda e: f"{e['task']}: warning: {e['message']}",
}
