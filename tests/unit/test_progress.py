"""Tests of tf_contrib_easgd.trainer.progress (event lines, their text) and of the live
display of a local job (tf_contrib_easgd.runner.display)."""

import io
import json

import pytest

from tf_contrib_easgd.runner.display import Display, parse_event
from tf_contrib_easgd.trainer import progress

PROGRESS = {
    "event": "progress",
    "task": "worker 1",
    "step": 200,
    "steps": 1000,
    "loss": 0.123456,
    "distance": 1.5,
    "steps_per_sec": 85.25,
    "exchanges": 40,
}
SUMMARY = {
    "event": "summary",
    "task": "worker 0",
    "test_accuracy": 0.97746,
    "test_examples": 355,
    "dataset": "digits",
    "num_workers": 2,
    "local_steps": {"0": 1000, "1": 1000},
    "exchanges": 200,
    "chief_secs": 20.0,
    "model_dir": "/tmp/run",
}


def test_json_reporter_lines_parse_back():
    stream = io.StringIO()
    progress.Reporter("worker 1", progress.JSON, stream).event("progress", step=3, loss=0.5)
    line = stream.getvalue()
    assert line.startswith(progress.EVENT_PREFIX) and line.endswith("\n")
    event = parse_event(line.rstrip("\n"))
    assert event["event"] == "progress" and event["task"] == "worker 1"
    assert (event["step"], event["loss"]) == (3, 0.5)
    assert isinstance(event["time"], float)  # Wall-clock time, comparable across tasks.


def test_text_reporter_prints_the_formatted_event():
    stream = io.StringIO()
    fields = {k: v for k, v in PROGRESS.items() if k not in ("event", "task")}
    progress.Reporter("worker 1", progress.TEXT, stream).event("progress", **fields)
    assert stream.getvalue() == progress.format_event(PROGRESS) + "\n"


def test_reporter_rejects_unknown_formats():
    with pytest.raises(ValueError, match=r"fmt must be one of \['text', 'json'\], got 'xml'"):
        progress.Reporter("ps 0", "xml")


@pytest.mark.parametrize(
    "line",
    [
        "plain TensorFlow log line",
        progress.EVENT_PREFIX + "{broken",
        progress.EVENT_PREFIX + json.dumps([1, 2]),
        progress.EVENT_PREFIX + json.dumps({"no": "event"}),
    ],
)
def test_parse_event_ignores_other_lines(line):
    assert parse_event(line) is None


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (PROGRESS, "worker 1: step 200/1000  loss 0.1235  elastic distance 1.5000  85.2 steps/s"
         "  exchanges 40"),
        ({"event": "centre", "task": "worker 0", "step": 500, "accuracy": 0.9, "loss": 0.25},
         "worker 0: centre at local step 500: test accuracy 0.9000, test loss 0.2500"),
        ({"event": "started", "task": "worker 1", "startup_secs": 12.34, "step": 0,
          "global_step": 37},
         "worker 1: session ready after 12.3 s at local step 0, 37 exchanges so far"),
        # After a recovery: how long the new session took from the lost task on.
        ({"event": "started", "task": "worker 1", "startup_secs": 95.0, "recovery_secs": 6.34,
          "step": 340, "global_step": 61, "recoveries": 1},
         "worker 1: session ready again 6.3 s after losing a task at local step 340, 61 "
         "exchanges so far"),
        ({"event": "started", "task": "worker 0", "startup_secs": 2.0, "step": 0,
          "global_step": 0, "transport": "direct"},
         "worker 0: session ready after 2.0 s at local step 0, 0 exchanges so far (exchange "
         "transport: direct)"),
        ({"event": "recovering", "task": "worker 0", "step": 120,
          "error": "InternalError: ps lost"},
         "worker 0: lost a task at local step 120 (InternalError: ps lost); waiting for it "
         "to come back"),
        ({"event": "waiting", "task": "worker 1", "what": "the chief"},
         "worker 1: waiting for the chief"),
        ({"event": "done", "task": "worker 1", "steps": 10, "secs": 2.0, "steps_per_sec": 5.0},
         "worker 1: done, 10 local steps in 2.0 s (5.0 steps/s)"),
        ({"event": "serving", "task": "ps 0", "address": "h:1"}, "ps 0: serving at h:1"),
        ({"event": "stopped", "task": "ps 0"}, "ps 0: stopped"),
        ({"event": "warning", "task": "worker 0", "message": "late"}, "worker 0: warning: late"),
        ({"event": "other", "task": "ps 0", "x": 1}, 'ps 0: other {"event": "other", "x": 1}'),
        (SUMMARY, "easgd-train: centre test accuracy 0.9775 on 355 digits test images | 2 "
         "workers, local steps [1000, 1000] | 200 exchanges | wall time 20.0 s | model_dir "
         "/tmp/run"),
    ],
)  # fmt: skip
def test_format_event(event, text):
    assert progress.format_event(event) == text


def test_summary_line_prefers_the_launchers_wall_time():
    assert "wall time 31.5 s" in progress.summary_line(dict(SUMMARY, wall_secs=31.5))


def test_display_without_a_terminal_prints_one_line_per_event():
    stream = io.StringIO()
    display = Display(num_workers=2, steps=1000, stream=stream, bar=False)
    display.event(PROGRESS)
    display.event({"event": "stopped", "task": "ps 0"})
    display.event(SUMMARY)  # The summary is the caller's to print.
    display.message("hello")
    display.close()
    assert stream.getvalue().splitlines() == [
        progress.format_event(PROGRESS),
        "ps 0: stopped",
        "hello",
    ]
    assert "\r" not in stream.getvalue()


def test_display_on_a_terminal_redraws_one_bar():
    stream = io.StringIO()
    display = Display(num_workers=2, steps=1000, stream=stream, bar=True)
    display.event(dict(PROGRESS, task="worker 0", step=500))
    display.event(PROGRESS)  # worker 1 at step 200: (500 + 200) / 2000 = 35 %.
    display.event({"event": "serving", "task": "ps 0", "address": "h:1"})  # Not shown.
    display.message("a message")
    display.close()
    out = stream.getvalue()
    # tqdm redraws its bar after a carriage return: the last one drawn is the job's state.
    bars = [part for part in out.split("\r") if part.startswith("[")]
    assert " 35% " in bars[-1] and "w0 500 loss" in bars[-1] and "w1 200 loss" in bars[-1]
    assert "exchanges 40" in bars[-1]
    assert "a message\n" in out
    assert "serving" not in out
    assert out.endswith("\n")
