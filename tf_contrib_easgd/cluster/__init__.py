"""Where a job runs: the cluster and this process's task, from host lists (`resolver`),
TF_CONFIG (`tf_config`) or a Slurm job step (`slurm`). No TensorFlow is imported until a
`ClusterSpec` is asked for; imports nothing from the rest of the package."""
