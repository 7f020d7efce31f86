"""easgd-train's runner: a local job as child processes of one launching process.

`launcher` starts any command lines as children (`LocalCluster`), watches their output,
restarts and stops them; `isolation` gives a local job a private network namespace;
`display` shows the tasks' progress events; `local` runs a whole easgd-train job on this
machine with them (`run_local`). Kept apart from the trainer, which is what runs inside
one task: the runner builds on the trainer's modules, and the trainer's command line
imports the runner only when it runs a local job (tests/unit/test_layers.py). The
benchmarks, the soak and the tests start their jobs with `launcher` too. No TensorFlow
here. docs/DESIGN.md, "The trainer's task lifecycle".
"""
