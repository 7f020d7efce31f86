# ruff: noqa: UP010 -- 2018 style on purpose: __future__ imports.
"""A small slim convolutional network for the 16x16 digits, in research/slim's style.

Left in TensorFlow 1.x form on purpose. `tf_upgrade_v2` turns its
`tf.contrib.layers.l2_regularizer` into `tf.keras.regularizers.l2`, which Keras 3 refuses
on TF1's reference variables: the program needs Keras 2 (tf-keras).
"""

from __future__ import absolute_import, division, print_function

import tensorflow as tf

slim = tf.contrib.slim


def digits_net_arg_scope(weight_decay=4e-5):
    """The arg_scope of the network's layers: ReLU, L2 weight decay."""
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected],
        activation_fn=tf.nn.relu,
        weights_regularizer=tf.contrib.layers.l2_regularizer(weight_decay),
    ) as scope:
        return scope


def digits_net(images, num_classes=10, scope="digits_net"):
    """Logits of `images` [N, 16, 16, 1]: conv 3x3, max pool, two fully connected layers."""
    with tf.variable_scope(scope, "digits_net", [images]):
        net = slim.conv2d(images, 16, [3, 3], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], scope="pool1")
        net = slim.flatten(net)
        net = slim.fully_connected(net, 64, scope="fc1")
        return slim.fully_connected(net, num_classes, activation_fn=None, scope="logits")
