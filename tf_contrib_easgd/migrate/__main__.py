# `python -m tf_contrib_easgd.migrate`: the same as the `easgd-migrate` command. No
# docstring here: absl's --help prints the main module's, which `cli` then sets to its own.
from tf_contrib_easgd.migrate import main

main()
