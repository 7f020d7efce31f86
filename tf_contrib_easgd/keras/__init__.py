"""Elastic Averaging SGD for Keras `model.fit` (TF 2, eager): `ElasticAverageCallback`.

Each worker process trains its own copy of the model with `model.fit` and meets the centre,
held by the parameter servers of a ps/worker cluster, every `communication_period` batches.
docs/KERAS.md shows how. Like the package, this module loads TensorFlow only when
`ElasticAverageCallback` is first used.
"""

import importlib

__all__ = ["ElasticAverageCallback"]


def __getattr__(name):
    if name != "ElasticAverageCallback":
        raise AttributeError(f"module 'tf_contrib_easgd.keras' has no attribute {name!r}")
    value = importlib.import_module("tf_contrib_easgd.keras.callback").ElasticAverageCallback
    globals()[name] = value  # Later lookups skip this function.
    return value


def __dir__():
    return sorted({*globals(), *__all__})
