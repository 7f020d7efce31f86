# ruff: noqa: UP010 -- 2018 style on purpose: __future__ imports.
"""What every module of the slim digits project shares: imports and flags, star-imported.

Left in TensorFlow 1.x form on purpose (README.md beside this file). `train.py` starts with
`from common import *` and uses the `tf` and `slim` bound here, as many TF1 projects split
across modules did.
"""

from __future__ import absolute_import, division, print_function

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

slim = tf.contrib.slim

flags = tf.app.flags
flags.DEFINE_string("job_name", None, "job name: worker or ps")
flags.DEFINE_integer("task_index", None, "Worker task index, should be >= 0.")
flags.DEFINE_string("ps_hosts", "localhost:2222", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "Worker hostname:port pairs")
flags.DEFINE_string("train_dir", "/tmp/easgd_slim_digits", "Checkpoints and summaries")
flags.DEFINE_integer("max_number_of_steps", 40, "Stop at this global step")
flags.DEFINE_integer("batch_size", 32, "Training batch size")
flags.DEFINE_float("learning_rate", 0.1, "Initial learning rate")
flags.DEFINE_integer("decay_steps", 30, "Global steps between learning-rate halvings")
flags.DEFINE_integer("communication_period", 8, "Local steps between exchanges")
FLAGS = flags.FLAGS

NUM_TRAIN = 1500  # The first 1500 digits train, the other 297 test.
IMAGE_SIZE = 16  # The 8x8 digits, resized.


def digits():
    """The 8x8 digits as float32 images in [0, 1] of shape [N, 8, 8, 1], and int64 labels."""
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., np.newaxis]
    return images, data.target.astype(np.int64)
