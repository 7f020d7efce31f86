"""easgd-train: trains a built-in model on a ps/worker cluster with the library.

`cli` defines the flags and `config` turns them (or TF_CONFIG) into a `TrainConfig`; local
mode (`local`) runs every task as a child process (`launcher`). A task (`task`) is a
parameter server or a worker (`worker`), which trains a `models` model on `data` in the
graph of `graph`, writes and evaluates the centre (`export`, file names in `files`) and
reports through `progress`. It uses the library's public names only. docs/TRAINING.md
documents the command; docs/DESIGN.md ("The trainer's task lifecycle") the design.
"""
