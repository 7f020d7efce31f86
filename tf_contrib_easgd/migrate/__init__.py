"""easgd-migrate: rewrites TF1 scripts that use tf.contrib's EASGD to use this package.

`cli` is the command line; `codemod` the rewrite of one source, with its helpers
`module_facts`, `contrib_names`, `tf1_apis`, `device_calls`, `import_block`, `legacy_keras`
and `hand_edits`. It reads source text only: nothing here imports TensorFlow.
"""
