"""Tests of tf_contrib_easgd.trainer.data: the embedded digits, shards, batches, the .npz loader."""

import os

import numpy as np
import pytest

from tf_contrib_easgd.trainer import data


@pytest.fixture(scope="module")
def digits():
    return data.load_digits()


def test_digits_split_is_fixed_stratified_and_disjoint(digits):
    # 1797 images; of each class (174..183 images) every 5th is a test image, i.e.
    # floor(n_class / 5) of them: 35+36+35+36+36+36+36+35+34+36 = 355 test, 1442 train.
    assert digits.x_train.shape == (1442, 8, 8, 1)
    assert digits.x_test.shape == (355, 8, 8, 1)
    assert digits.num_classes == 10
    assert digits.image_shape == (8, 8, 1)
    np.testing.assert_array_equal(
        np.bincount(digits.y_test), [35, 36, 35, 36, 36, 36, 36, 35, 34, 36]
    )
    assert digits.x_train.dtype == np.float32 and digits.y_train.dtype == np.int64
    # Pixels are 0..16 in the file, scaled by 1/16.
    assert digits.x_train.min() == 0.0 and digits.x_train.max() == 1.0
    # No test image is also a training image (the digits have no exact duplicates across
    # this split, so comparing raw bytes is enough).
    train = {image.tobytes() for image in digits.x_train}
    assert not any(image.tobytes() in train for image in digits.x_test)


def test_digits_split_is_the_same_on_every_load(digits):
    again = data.load_digits()
    np.testing.assert_array_equal(again.x_test, digits.x_test)
    np.testing.assert_array_equal(again.y_train, digits.y_train)


def test_load_by_name(digits):
    assert data.load("digits").x_test.shape == digits.x_test.shape


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_are_disjoint_cover_the_training_set_and_balanced(digits, count):
    shards = [digits.shard(index, count) for index in range(count)]
    sizes = [len(x) for x, _ in shards]
    assert sum(sizes) == 1442
    assert max(sizes) - min(sizes) <= 1
    merged = np.concatenate([x for x, _ in shards])
    assert len({image.tobytes() for image in merged}) == len(
        {image.tobytes() for image in digits.x_train}
    )


@pytest.mark.parametrize(
    ("index", "count", "message"),
    [(0, 0, "count must be >= 1, got 0"), (2, 2, r"index must be in \[0, 2\), got 2")],
)
def test_shard_rejects_bad_arguments(digits, index, count, message):
    with pytest.raises(ValueError, match=message):
        digits.shard(index, count)


def test_shard_that_would_be_empty_is_an_error():
    tiny = data.Dataset(
        "tiny", np.zeros((2, 2, 2, 1), np.float32), np.array([0, 1]), np.zeros((1, 2, 2, 1)),
        np.array([0]), 2,
    )  # fmt: skip
    with pytest.raises(ValueError, match="Shard 2 of 3 of dataset 'tiny' is empty"):
        tiny.shard(2, 3)


def test_batches_are_full_cover_an_epoch_and_reshuffle():
    images = np.arange(10)
    stream = data.batches(images, images * 10, batch_size=4, seed=0)
    first = [next(stream) for _ in range(5)]  # 20 examples = exactly 2 epochs
    assert all(len(x) == 4 for x, _ in first)
    assert all(np.array_equal(y, x * 10) for x, y in first)
    seen = np.concatenate([x for x, _ in first])
    np.testing.assert_array_equal(np.sort(seen[:10]), np.arange(10))
    np.testing.assert_array_equal(np.sort(seen[10:]), np.arange(10))
    assert not np.array_equal(seen[:10], seen[10:])  # A new order in the second epoch.


def test_batches_are_reproducible_per_seed():
    images = np.arange(100)
    a = next(data.batches(images, images, 8, seed=(0, 1)))[0]
    b = next(data.batches(images, images, 8, seed=(0, 1)))[0]
    c = next(data.batches(images, images, 8, seed=(0, 2)))[0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_batches_reject_bad_arguments():
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        next(data.batches(np.arange(3), np.arange(3), 0, seed=0))
    with pytest.raises(ValueError, match="no examples"):
        next(data.batches(np.arange(0), np.arange(0), 1, seed=0))


def _mnist_like(**overrides):
    arrays = {
        "x_train": np.random.default_rng(0).integers(0, 256, (6, 28, 28), dtype=np.uint8),
        "y_train": np.array([0, 1, 2, 3, 4, 9], np.uint8),
        "x_test": np.random.default_rng(1).integers(0, 256, (3, 28, 28), dtype=np.uint8),
        "y_test": np.array([5, 6, 7], np.int64),
    }
    arrays.update(overrides)
    return {key: value for key, value in arrays.items() if value is not None}


def test_npz_mnist_layout_loads(tmp_path):
    path = tmp_path / "mnist.npz"
    arrays = _mnist_like()
    np.savez(path, **arrays)
    dataset = data.load(str(path))
    assert dataset.name == str(path)
    assert dataset.x_train.shape == (6, 28, 28, 1) and dataset.x_test.shape == (3, 28, 28, 1)
    # uint8 pixels are divided by 255; labels become int64; 10 classes (max label 9).
    np.testing.assert_allclose(dataset.x_train[..., 0], arrays["x_train"] / 255.0, rtol=1e-6)
    assert dataset.y_train.dtype == np.int64
    assert dataset.num_classes == 10


def test_npz_float_images_with_channels_load(tmp_path):
    path = tmp_path / "float.npz"
    np.savez(
        path,
        **_mnist_like(
            x_train=np.full((6, 4, 4, 3), 0.5, np.float32),
            x_test=np.zeros((3, 4, 4, 3), np.float64),
        ),
    )
    dataset = data.load_npz(path)
    assert dataset.image_shape == (4, 4, 3)
    assert dataset.x_train.dtype == np.float32 and dataset.x_train.max() == 0.5


def _junk(path):
    path.write_bytes(b"not a zip file")
    return str(path)


def _write(path, arrays):
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: str(p / "absent.npz"), "does not exist"),
        (os.fspath, "is a directory"),
        (lambda p: _junk(p / "junk.npz"), "is not a readable .npz file"),
        (lambda p: _write(p / "m.npz", _mnist_like(y_test=None)),
         r"lacks the array\(s\) \['y_test'\]"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_train=np.zeros((6, 784)))),
         r"x_train must be a non-empty array of images .* got shape \(6, 784\)"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_test=np.zeros((0, 28, 28)))),
         "x_test must be a non-empty array"),
        (lambda p: _write(p / "m.npz", _mnist_like(y_train=np.zeros(5, np.int64))),
         "y_train has 5 labels but x_train has 6 images"),
        (lambda p: _write(p / "m.npz", _mnist_like(y_train=np.zeros(6, np.float32))),
         "y_train must be a 1-D array of integer class indices, got dtype float32"),
        (lambda p: _write(p / "m.npz", _mnist_like(y_test=np.array([0, -1, 2]))),
         "y_test holds a negative label -1"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_train=np.full((6, 28, 28), 2.0))),
         r"float pixels of x_train must be in \[0, 1\], got values in \[2.0, 2.0\]"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_test=np.full((3, 28, 28), 300, np.int32))),
         r"integer pixels of x_test must be in \[0, 255\]"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_test=np.zeros((3, 14, 14), np.uint8))),
         r"x_train images have shape \(28, 28, 1\) but x_test images have shape \(14, 14, 1\)"),
        (lambda p: _write(p / "m.npz", _mnist_like(x_train=np.full((6, 2, 2), "a"))),
         "must hold integer or float pixels"),
        (lambda p: _write(p / "m.npz", _mnist_like(y_train=np.zeros(6, "i8"), y_test=[0, 0, 0])),
         "the labels name a single class"),
    ],
    ids=[
        "missing", "directory", "not-a-zip", "missing-key", "flat-images", "empty",
        "label-count", "float-labels", "negative-label", "float-range", "int-range",
        "shape-mismatch", "string-pixels", "one-class",
    ],
)  # fmt: skip
def test_npz_errors_name_the_path_and_the_problem(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(data.DatasetError, match=message) as caught:
        data.load(path)
    assert repr(str(path)) in str(caught.value)  # The message names the path.
    assert isinstance(caught.value, ValueError)
