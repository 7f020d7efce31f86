"""The line protocol between benchmarks/run.py's driver and a task process.

The driver writes one JSON command a line to the task's stdin; the task answers each with a
line starting with `REPLY_PREFIX`. Shared by task.py (TF 2.x) and contrib_task.py (TF 1.15
on Python 3.7), so it is Python 3.7 code and imports no TensorFlow.
"""

import json
import sys

REPLY_PREFIX = "BENCH "  # Starts each answer line of a task (cluster.py reads them).


def reply(message):
    """Writes one answer line to stdout."""
    sys.stdout.write(REPLY_PREFIX + json.dumps(message) + "\n")
    sys.stdout.flush()


def serve_commands(worker, lines, reply):
    """Answers the JSON commands in `lines` until "exit" or the end of input.

    Each command names a method of `worker` ("cmd") and its keyword arguments; the answer is
    `{"ok": True, **result}`, or `{"ok": False, "error": ...}` when the method raised.
    """
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        command = request.pop("cmd")
        if command == "exit":
            worker.close()
            reply({"ok": True})
            return
        try:
            result = getattr(worker, command)(**request)
        except Exception as error:  # Reported to the driver, which stops the benchmark.
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"})
        else:
            answer = {"ok": True}
            answer.update(result)
            reply(answer)
