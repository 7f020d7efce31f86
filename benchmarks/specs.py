"""The benchmark models' shapes and batches, without TensorFlow (the drivers import this)."""

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A classifier: name, "mlp" or "cnn", one example's shape, hidden widths (mlp) or
    convolution channels (cnn), classes, and the batch of a local step."""

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
            widths = (math.prod(self.input_shape), *self.layers, self.num_classes)
            for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:], strict=False)):
                shapes[f"layer_{i}/weights"] = (fan_in, fan_out)
                shapes[f"layer_{i}/biases"] = (fan_out,)
            return shapes
        channels = (self.input_shape[-1], *self.layers)
        for i, (fan_in, fan_out) in enumerate(zip(channels, channels[1:], strict=False)):
            shapes[f"conv_{i}/filters"] = (3, 3, fan_in, fan_out)
            shapes[f"conv_{i}/biases"] = (fan_out,)
        shapes["logits/weights"] = (channels[-1], self.num_classes)
        shapes["logits/biases"] = (self.num_classes,)
        return shapes

    @property
    def num_params(self):
        return sum(math.prod(shape) for shape in self.shapes().values())

    def as_json(self):
        """The spec with its variables in creation order, for models.py."""
        return {
            **dataclasses.asdict(self),
            "shapes": [[name, list(shape)] for name, shape in self.shapes().items()],
        }


def synthetic_batch(spec, seed=0):
    """A fixed random batch for throughput runs: (images, labels) as numpy arrays."""
    rng = np.random.default_rng(seed)
    images = rng.random((spec.batch_size, *spec.input_shape), dtype=np.float32)
    labels = rng.integers(0, spec.num_classes, spec.batch_size).astype(np.int32)
    return images, labels


#: Communication-heavy: 2.9 M parameters, little compute per parameter.
COMM_MLP = ModelSpec("mlp-2.9M", "mlp", (784,), (1024, 1024, 1024), 10, 64)
#: Compute-heavy: 0.1 M parameters, three 3x3 convolutions on 32x32x3 images.
COMPUTE_CNN = ModelSpec("cnn-0.1M", "cnn", (32, 32, 3), (32, 64, 128), 10, 16)
#: The time-to-accuracy model: the same MLP shape on the 8x8 digits (2.2 M).
DIGITS_MLP = ModelSpec("digits-mlp-2.2M", "mlp", (64,), (1024, 1024, 1024), 10, 32)
#: A tiny model (25 K parameters), where a fixed cost per step weighs most.
TINY_MLP = ModelSpec("mlp-25K", "mlp", (784,), (32,), 10, 64)

MODELS = {spec.name: spec for spec in (COMM_MLP, COMPUTE_CNN, DIGITS_MLP, TINY_MLP)}
