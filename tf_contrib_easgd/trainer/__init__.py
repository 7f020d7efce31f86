"""easgd-train: trains a built-in model on a ps/worker cluster with the library.

`cli` reads the flags or TF_CONFIG and runs one task or a local cluster (`launcher`); a
task (`task`) is a parameter server or a worker that trains a `models` model on `data`,
reporting through `progress`. It uses the library's public names only. docs/TRAINING.md
documents the command; docs/DESIGN.md the task lifecycle.
"""
