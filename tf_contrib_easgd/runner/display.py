"""What a local job shows of its tasks' progress events: a tqdm bar on a terminal, else lines.

`run_local` (`local`) gives `Display` each event `parse_event` finds in a task's output; the
text of an event is the one a task run by hand prints (`trainer.progress.format_event`). No
TensorFlow here.
"""

import json

import tqdm

from tf_contrib_easgd.trainer.progress import EVENT_PREFIX, format_event


def parse_event(line):
    """Returns the event of a JSON event line (`trainer.progress`), or None for any other line."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        event = json.loads(line[len(EVENT_PREFIX) :])
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


class Display:
    """Shows the events of a local job: a tqdm progress bar on a terminal, else lines.

    Args:
        num_workers: number of workers of the job.
        steps: local steps each worker takes.
        stream: where to write (the launcher's stderr).
        bar: whether to draw a progress bar (on a terminal) instead of event lines.
    """

    def __init__(self, num_workers, steps, stream, bar):
        self._stream = stream
        self._state = {f"worker {i}": {"step": 0} for i in range(num_workers)}
        self._exchanges = 0
        self._bar = None
        if bar:
            self._bar = tqdm.tqdm(
                total=steps * num_workers,
                file=stream,
                bar_format="[{bar:24}] {percentage:3.0f}% {desc}",
                ascii=".#",
                mininterval=0,
                disable=False,
            )

    def event(self, event):
        """Takes one event; the summary is left to the caller."""
        kind, task = event.get("event"), event.get("task")
        if kind == "summary":
            return
        if kind == "progress" and task in self._state:
            self._state[task] = event
            self._exchanges = max(self._exchanges, event["exchanges"])
            if self._bar is not None:
                self._draw()
                return
        if kind == "done" and task in self._state:
            self._state[task] = dict(self._state[task], step=event["steps"])
        if self._bar is not None and kind in _SAID_BY_THE_BAR:
            return
        self.message(format_event(event))

    def message(self, text):
        """Prints a line of text (above the bar, if one is drawn)."""
        if self._bar is not None:
            self._bar.write(text, file=self._stream)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def close(self):
        """Ends the bar's line."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _draw(self):
        parts = []
        for name, state in self._state.items():
            short = name.replace("worker ", "w")
            if "loss" in state:
                parts.append(
                    f"{short} {state['step']} loss {state['loss']:.3f} "
                    f"d {state['distance']:.2f} {state['steps_per_sec']:.0f}/s"
                )
            else:
                parts.append(f"{short} {state['step']}")
        self._bar.n = sum(state["step"] for state in self._state.values())
        self._bar.set_description_str(" | ".join([*parts, f"exchanges {self._exchanges}"]))


#: The events a progress bar makes needless as lines.
_SAID_BY_THE_BAR = ("started", "serving", "stopped", "waiting", "done", "recovering")
