"""The driver <-> task protocol and the models its commands name (Python 3.7, no TensorFlow).

The driver writes one JSON command a line to a task's stdin; the task answers each with a
line starting with `REPLY_PREFIX`. The drivers and every task process import this module.
"""

import dataclasses
import hashlib
import json
import sys

import numpy as np

REPLY_PREFIX = "BENCH "

#: The forms of one exchange's calls that scale.py's `calls` measures in the same run (each
#: a `scale_task.EXCHANGES` exchange), with their names in docs/SCALING.md: the exchange
#: before issue 38 (its calls one after the other, each task's replies after its
#: updates), the library's calls one after the other, and the library's exchange.
CALL_FORMS = {"before_38": "before issue 38", "one_by_one": "one after the other",
              "at_once": "at once"}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A classifier: "mlp" (hidden widths) or "cnn" (convolution channels) `layers`."""

    name: str
    kind: str
    input_shape: tuple
    layers: tuple
    num_classes: int
    batch_size: int

    def shapes(self):
        """Each variable's name and shape, in creation order."""
        shapes = {}
        if self.kind == "mlp":
            widths = (int(np.prod(self.input_shape)), *self.layers, self.num_classes)
            for i, (a, b) in enumerate(zip(widths, widths[1:])):
                shapes[f"layer_{i}/weights"], shapes[f"layer_{i}/biases"] = (a, b), (b,)
            return shapes
        channels = (self.input_shape[-1], *self.layers)
        for i, (a, b) in enumerate(zip(channels, channels[1:])):
            shapes[f"conv_{i}/filters"], shapes[f"conv_{i}/biases"] = (3, 3, a, b), (b,)
        shapes["logits/weights"] = (channels[-1], self.num_classes)
        shapes["logits/biases"] = (self.num_classes,)
        return shapes

    @property
    def num_params(self):
        return sum(int(np.prod(shape)) for shape in self.shapes().values())


def synthetic_batch(spec, seed=0):
    """A fixed random batch for throughput runs: (images, labels) as numpy arrays."""
    rng = np.random.default_rng(seed)
    images = rng.random((spec.batch_size, *spec.input_shape), dtype=np.float32)
    return images, rng.integers(0, spec.num_classes, spec.batch_size).astype(np.int32)


#: Communication-heavy: 2.9 M parameters, little compute per parameter.
COMM_MLP = ModelSpec("mlp-2.9M", "mlp", (784,), (1024, 1024, 1024), 10, 64)
#: Compute-heavy: 0.1 M parameters, three 3x3 convolutions on 32x32x3 images.
COMPUTE_CNN = ModelSpec("cnn-0.1M", "cnn", (32, 32, 3), (32, 64, 128), 10, 16)
#: The time-to-accuracy model: the same MLP shape on the 8x8 digits (2.2 M).
DIGITS_MLP = ModelSpec("digits-mlp-2.2M", "mlp", (64,), (1024, 1024, 1024), 10, 32)
#: A tiny model (25 K parameters), where a fixed cost per step weighs most.
TINY_MLP = ModelSpec("mlp-25K", "mlp", (784,), (32,), 10, 64)
MODELS = {spec.name: spec for spec in (COMM_MLP, COMPUTE_CNN, DIGITS_MLP, TINY_MLP)}


def reply(message):
    """Writes one answer line to stdout."""
    sys.stdout.write(REPLY_PREFIX + json.dumps(message) + "\n")
    sys.stdout.flush()


def parse_reply(line):
    """The answer a line of a task's output carries (as `reply` wrote it), or None."""
    if not line.startswith(REPLY_PREFIX):
        return None
    return json.loads(line[len(REPLY_PREFIX) :])


def serve_commands(task, lines):
    """Answers the commands in `lines` (`{"cmd": method of task, **kwargs}`) until "exit"
    or the end of input; a method that raises answers `{"ok": False, "error"}`."""
    for line in lines:
        if not line.strip():
            continue
        request = json.loads(line)
        command = request.pop("cmd")
        if command == "exit":
            task.close()
            return reply({"ok": True})
        try:
            answer = dict(getattr(task, command)(**request), ok=True)
        except Exception as error:  # Reported to the driver, which stops the benchmark.
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        reply(answer)


def digest(items):
    """The SHA-256 of (name, array) pairs: their names, dtypes, shapes and bytes."""
    sha = hashlib.sha256()
    for name, item in items:
        value = np.ascontiguousarray(item)
        sha.update(f"{name}:{value.dtype.str}:{','.join(map(str, value.shape))};".encode())
        sha.update(value.tobytes())
    return sha.hexdigest()
