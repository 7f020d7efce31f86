"""easgd-train: trains a built-in model on a ps/worker cluster with the library.

`cli` defines the flags and `config` turns them (or TF_CONFIG) into a `TrainConfig`; local
mode runs every task as a child process with the runner (`tf_contrib_easgd.runner`, which
`cli` imports only then). A task (`task`) is a parameter server or a worker (`worker`),
which trains a `models` model (TF1 or Keras) on `data` in the graph of `graph`, writes and
evaluates the centre (`export`, file names in `files`) and reports through `progress`. It
uses the library's public names only. docs/TRAINING.md documents the command;
docs/DESIGN.md ("The trainer's task lifecycle") the design.
"""

import importlib.util
import sys

#: The modules `easgd-train` needs from the `train` extra (a lean install has none of them).
EXTRA_MODULES = ("sklearn", "portpicker", "tqdm", "psutil")


def main(argv=None):
    """`easgd-train`: says in one line which install is missing, else runs `cli.main`."""
    if any(importlib.util.find_spec(module) is None for module in EXTRA_MODULES):
        sys.exit(
            "easgd-train: needs this package's train extra (scikit-learn, portpicker, tqdm, "
            "psutil): pip install 'tf_contrib_easgd[train]'"
        )
    from tf_contrib_easgd.trainer.cli import main as cli_main  # noqa: PLC0415

    return cli_main(argv)
