"""A chaos soak of easgd-train: a seeded run of one or two ps and a few workers under faults.

`python -m soak` (`make soak`, root only) starts a job of easgd-train tasks, each in a
network namespace of its own, injects a seeded random schedule of faults (`schedule`),
measures what each one cost from the tasks' progress events (`measure`), checks the job's
end (`checks`) and prints a table (`report`). docs/RELIABILITY.md, "Chaos soak", has the bounds it
checks and the figures of one run. Nothing here imports TensorFlow but `digest`.
"""
