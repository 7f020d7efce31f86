"""Elastic Averaging SGD for variables trained eagerly in TF 2: `ElasticAverageWorker`.

A custom training loop calls the worker once per step; the Keras callback
(`tf_contrib_easgd.keras`) drives the same worker from `model.fit`. Each worker reaches the
centre on the parameter servers through a TF1 graph and session of its own (`centre_link`).
"""
