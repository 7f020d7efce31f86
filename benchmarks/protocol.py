"""The driver <-> task line protocol, and the fingerprint of a worker's start.

The driver writes one JSON command a line to a task's stdin; the task answers each with a
line starting with `REPLY_PREFIX`. Python 3.7 code without TensorFlow: contrib_task.py runs
it under TensorFlow 1.15.
"""

import hashlib
import json
import sys

import numpy as np

REPLY_PREFIX = "BENCH "


def reply(message):
    """Writes one answer line to stdout."""
    sys.stdout.write(REPLY_PREFIX + json.dumps(message) + "\n")
    sys.stdout.flush()


def serve_commands(worker, lines):
    """Answers the commands in `lines` (`{"cmd": method of worker, **kwargs}`) until "exit"
    or the end of input; a method that raises answers `{"ok": False, "error"}`."""
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
            answer = dict(getattr(worker, command)(**request), ok=True)
        except Exception as error:  # Reported to the driver, which stops the benchmark.
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        reply(answer)


def _digest(items):
    digest = hashlib.sha256()
    for name, item in items:
        value = np.ascontiguousarray(item)
        header = "{}:{}:{};".format(name, value.dtype.str, ",".join(map(str, value.shape)))
        digest.update(header.encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def fingerprint(session, variables, loss, images, labels):
    """SHA-256 digests of `variables` (names, shapes, values) and of the batch, and the
    loss: the contrib section compares them across TensorFlow versions."""
    values = session.run(list(variables))
    return {
        "params": _digest((v.op.name, value) for v, value in zip(variables, values)),
        "batch": _digest((("images", images), ("labels", labels))),
        "variables": len(values),
        "loss": float(session.run(loss)),
    }
