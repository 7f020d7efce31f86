"""easgd-migrate: rewrites TF1 scripts that use tf.contrib's EASGD to use this package.

`cli` is the command line (with `source_problems`, the sources it cannot migrate); `codemod`
the rewrite of one source, with its helpers `module_facts`, `contrib_names`,
`estimator_apis` (with `canned_estimators`), `session_calls`, `tf1_apis`, `device_calls`,
`import_block`, `legacy_keras`, `hand_edits`, `line_map`, `import_aware` and `versions`
(one metadata analysis per version of a module). It reads source text only: nothing here
imports TensorFlow.
"""

import importlib.util
import sys

#: The modules `easgd-migrate` needs from the `migrate` extra (a lean install has none of them).
EXTRA_MODULES = ("libcst",)


def main(argv=None):
    """`easgd-migrate`: says in one line which install is missing, else runs `cli.main`."""
    if any(importlib.util.find_spec(module) is None for module in EXTRA_MODULES):
        sys.exit(
            "easgd-migrate: needs this package's migrate extra (libcst): "
            "pip install 'tf_contrib_easgd[migrate]'"
        )
    from tf_contrib_easgd.migrate.cli import main as cli_main  # noqa: PLC0415

    return cli_main(argv)
