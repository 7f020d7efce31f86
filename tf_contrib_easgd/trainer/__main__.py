# `python -m tf_contrib_easgd.trainer`: the same as the `easgd-train` command. No
# docstring here: absl's --help prints the main module's, which `cli` then sets to its own.
from tf_contrib_easgd.trainer import main

main()
