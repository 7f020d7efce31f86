"""Datasets of easgd-train: the embedded 8x8 digits and MNIST-style `.npz` files.

Images come out as float32 arrays of shape `(n, height, width, channels)` scaled to
[0, 1], labels as int64 class indices. This module needs numpy only (scikit-learn for the
embedded digits), never TensorFlow, so the launcher can check a dataset before it starts
any TensorFlow process.
"""

import dataclasses
import math
import os
import zipfile

import numpy as np

#: The name of the embedded dataset (scikit-learn's bundled 8x8 handwritten digits).
DIGITS = "digits"

#: Every `TEST_EVERY`-th image of each class (in file order) is held out for testing.
TEST_EVERY = 5

_NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


class DatasetError(ValueError):
    """A dataset is missing, unreadable or malformed; the message names the path."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A train/test split of an image classification dataset.

    Attributes:
        name: `"digits"` or the path of the `.npz` file.
        x_train: float32 images `(n_train, height, width, channels)` in [0, 1].
        y_train: int64 labels `(n_train,)` in `[0, num_classes)`.
        x_test: float32 images `(n_test, height, width, channels)` in [0, 1].
        y_test: int64 labels `(n_test,)`.
        num_classes: number of classes (1 + the largest label).
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def image_shape(self):
        """`(height, width, channels)` of one image."""
        return tuple(self.x_train.shape[1:])

    def shard(self, index, count):
        """Returns `(images, labels)` of training shard `index` (a worker's task index) of
        `count` (the number of workers): the examples index, index + count, ..., so the
        shards are disjoint, cover the training set and differ in size by at most one.

        Raises:
            ValueError: if `count < 1`, `index` is outside `[0, count)` or the shard would be
                empty.
        """
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count!r}.")
        if not 0 <= index < count:
            raise ValueError(f"index must be in [0, {count}), got {index!r}.")
        if index >= len(self.x_train):
            raise ValueError(
                f"Shard {index} of {count} of dataset {self.name!r} is empty: it has only "
                f"{len(self.x_train)} training examples."
            )
        return self.x_train[index::count], self.y_train[index::count]


def load(name):
    """Returns the `Dataset` `name`: `"digits"` (`load_digits`) or the path of an MNIST-style
    `.npz` file (`load_npz`, which raises its `DatasetError`)."""
    if name == DIGITS:
        return load_digits()
    return load_npz(name)


def load_digits():
    """Returns scikit-learn's 8x8 digits (1797 images) with a fixed, stratified split.

    Of each class, every fifth image in file order (the 5th, 10th, ...) is a test image:
    355 test images and 1442 training images, the same on every machine and with no random
    numbers involved. Pixels (0..16 in the file) are scaled to [0, 1].

    Returns:
        A `Dataset` named `"digits"` with images of shape `(8, 8, 1)` and 10 classes.
    """
    # Imported here: scikit-learn is only needed for this dataset.
    from sklearn.datasets import load_digits as sklearn_load_digits  # noqa: PLC0415

    bunch = sklearn_load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[..., np.newaxis]
    labels = bunch.target.astype(np.int64)
    is_test = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        (positions,) = np.nonzero(labels == label)
        is_test[positions[TEST_EVERY - 1 :: TEST_EVERY]] = True
    return Dataset(
        name=DIGITS,
        x_train=images[~is_test],
        y_train=labels[~is_test],
        x_test=images[is_test],
        y_test=labels[is_test],
        num_classes=int(labels.max()) + 1,
    )


def load_npz(path):
    """Reads MNIST-style arrays `x_train, y_train, x_test, y_test` from the `.npz` file `path`.

    This is the layout of Keras' `mnist.npz`: images `(n, height, width)` or
    `(n, height, width, channels)`, integer or float pixels, and integer labels `(n,)`.
    Integer pixels are divided by 255 (by 1 if all are 0 or 1); float pixels must already
    be in [0, 1].

    Returns:
        A `Dataset` named after `path`.

    Raises:
        DatasetError: naming `path` and what is wrong, if the file is missing or
            unreadable, lacks one of the four arrays, or holds arrays of the wrong shape,
            type or range.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DatasetError(f"Dataset {path!r} does not exist (expected 'digits' or a .npz file).")
    if os.path.isdir(path):
        raise DatasetError(f"Dataset {path!r} is a directory, not a .npz file.")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [key for key in _NPZ_KEYS if key not in npz.files]
            if missing:
                raise DatasetError(
                    f"Dataset {path!r} lacks the array(s) {missing}: an MNIST-style .npz "
                    f"needs {list(_NPZ_KEYS)}, it has {sorted(npz.files)}."
                )
            arrays = {key: npz[key] for key in _NPZ_KEYS}
    except DatasetError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise DatasetError(f"Dataset {path!r} is not a readable .npz file: {error}") from None

    x_train = _images(arrays["x_train"], "x_train", path)
    x_test = _images(arrays["x_test"], "x_test", path)
    y_train = _labels(arrays["y_train"], "y_train", len(x_train), "x_train", path)
    y_test = _labels(arrays["y_test"], "y_test", len(x_test), "x_test", path)
    if x_train.shape[1:] != x_test.shape[1:]:
        raise DatasetError(
            f"Dataset {path!r}: x_train images have shape {x_train.shape[1:]} but x_test "
            f"images have shape {x_test.shape[1:]}."
        )
    num_classes = int(max(y_train.max(), y_test.max())) + 1
    if num_classes < 2:
        raise DatasetError(f"Dataset {path!r}: the labels name a single class, need at least 2.")
    return Dataset(path, x_train, y_train, x_test, y_test, num_classes)


def _images(array, key, path):
    """Checks one image array of an `.npz` file and returns it as float32 NHWC in [0, 1]."""
    if array.ndim not in (3, 4) or len(array) == 0 or 0 in array.shape:
        raise DatasetError(
            f"Dataset {path!r}: {key} must be a non-empty array of images shaped "
            f"(n, height, width) or (n, height, width, channels), got shape {array.shape}."
        )
    if array.ndim == 3:
        array = array[..., np.newaxis]
    if np.issubdtype(array.dtype, np.integer) or array.dtype == bool:
        peak = 1.0 if array.max() <= 1 else 255.0
        if array.min() < 0 or array.max() > 255:
            raise DatasetError(
                f"Dataset {path!r}: integer pixels of {key} must be in [0, 255], got values "
                f"in [{array.min()}, {array.max()}]."
            )
        return (array / peak).astype(np.float32)
    if np.issubdtype(array.dtype, np.floating):
        low, high = float(array.min()), float(array.max())
        if not (math.isfinite(low) and math.isfinite(high)) or low < 0.0 or high > 1.0:
            raise DatasetError(
                f"Dataset {path!r}: float pixels of {key} must be in [0, 1], got values in "
                f"[{low}, {high}]."
            )
        return array.astype(np.float32)
    raise DatasetError(
        f"Dataset {path!r}: {key} must hold integer or float pixels, got dtype {array.dtype}."
    )


def _labels(array, key, count, images_key, path):
    """Checks one label array of an `.npz` file and returns it as int64."""
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise DatasetError(
            f"Dataset {path!r}: {key} must be a 1-D array of integer class indices, got "
            f"dtype {array.dtype} and shape {array.shape}."
        )
    if len(array) != count:
        raise DatasetError(
            f"Dataset {path!r}: {key} has {len(array)} labels but {images_key} has {count} images."
        )
    if array.min() < 0:
        raise DatasetError(f"Dataset {path!r}: {key} holds a negative label {array.min()}.")
    return array.astype(np.int64)


def batches(images, labels, batch_size, seed):
    """Yields `(images[batch], labels[batch])` of `batch_size` forever, reshuffled with `seed`
    at every epoch; batches wrap around epochs, so they are always full.

    Raises:
        ValueError: if `batch_size < 1` or there are no examples.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}.")
    if len(images) == 0:
        raise ValueError("batches() got no examples.")
    rng = np.random.default_rng(seed)
    order = np.empty(0, dtype=np.int64)
    while True:
        while len(order) < batch_size:
            order = np.concatenate([order, rng.permutation(len(images))])
        batch, order = order[:batch_size], order[batch_size:]
        yield images[batch], labels[batch]
