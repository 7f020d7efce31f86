# ruff: noqa: UP010 -- 2018 style on purpose: __future__ imports.
"""The input helper of the slim digits project: a queue pipeline with image summaries.

Left in TensorFlow 1.x form on purpose. Its functions build graph ops for `train.py`: a
`slice_input_producer` and `shuffle_batch` queue, the images resized with TF1's integer
method 0 (bilinear), and two image summaries, one with a box drawn on the batch.
"""

from __future__ import absolute_import, division, print_function

import tensorflow as tf


def resize(images, size):
    """Resizes `images` [N, H, W, C] to `size` x `size`, bilinearly (TF1's method 0)."""
    return tf.image.resize_images(images, [size, size], method=0)


def inputs(images, labels, batch_size, size, seed):
    """A shuffled batch of (images resized to `size`, labels), fed by queue runners."""
    image, label = tf.train.slice_input_producer([images, labels], shuffle=True, seed=seed)
    image_batch, label_batch = tf.train.shuffle_batch(
        [image, label],
        batch_size=batch_size,
        capacity=20 * batch_size,
        min_after_dequeue=10 * batch_size,
        seed=seed,
    )
    image_batch = resize(image_batch, size)
    tf.summary.image("input_images", image_batch, max_outputs=2)
    box = tf.constant([[[0.1, 0.1, 0.9, 0.9]]]) * tf.ones([batch_size, 1, 1])
    tf.summary.image("boxed_images", tf.image.draw_bounding_boxes(image_batch, box), max_outputs=2)
    return image_batch, label_batch
