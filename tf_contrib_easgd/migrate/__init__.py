"""easgd-migrate: rewrites TF1 scripts that use tf.contrib's EASGD to use this package.

`cli` is the command line (with `source_problems`, the sources it cannot migrate); `codemod`
the rewrite of one source, with its helpers `module_facts`, `contrib_names`,
`estimator_apis` (with `canned_estimators`), `session_calls`, `tf1_apis`, `device_calls`,
`import_block`, `legacy_keras`, `hand_edits`, `line_map` and `import_aware`. It reads
source text only: nothing here imports TensorFlow.
"""
