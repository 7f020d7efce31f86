"""A lean install: the library needs TensorFlow, absl-py, numpy and protobuf, nothing more.

easgd-train's packages (scikit-learn, portpicker, tqdm, psutil) come with the `train` extra and
easgd-migrate's (libcst) with `migrate`. The wheel's metadata is read from a wheel built
from this checkout; the modules an EASGD graph loads, and the console scripts without
their extra, are checked in fresh interpreters.
"""

import email
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL_TIMEOUT_SECS = 180
#: What the library alone may require, by distribution name.
CORE = {"tensorflow", "protobuf", "absl-py", "numpy"}
#: Top-level modules of the extras' packages (scipy comes with scikit-learn).
EXTRA_MODULES = ("sklearn", "scipy", "libcst", "portpicker", "tqdm", "psutil")


def _requirements(metadata):
    """{extra or None: set of distribution names} from a wheel's METADATA text."""
    found = {}
    for requirement in email.message_from_string(metadata).get_all("Requires-Dist") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        found.setdefault(extra and extra.group(1), set()).add(name)
    return found


def test_the_wheel_requires_the_core_and_puts_each_programs_packages_in_its_extra(tmp_path):
    # Built from a copy: setuptools writes build/ and egg-info beside the sources.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT / "tf_contrib_easgd",
        source / "tf_contrib_easgd",
        ignore=shutil.ignore_patterns("__pycache__", "BUILD"),
    )
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=TOOL_TIMEOUT_SECS,
    )
    (wheel,) = tmp_path.glob("tf_contrib_easgd-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requirements = _requirements(archive.read(name).decode())
    assert requirements[None] == CORE
    assert requirements["train"] == {"scikit-learn", "portpicker", "tqdm", "psutil"}
    assert requirements["migrate"] == {"libcst"}


# Builds contrib's between-graph pattern on one worker, as a migrated script does (the
# getter under a replica_device_setter, the optimizer's train op, its hook and saver) in an
# interpreter where the extras' modules cannot be imported, as in a lean install: a None in
# sys.modules makes `import` raise ImportError. Keras 3, which `import tensorflow` loads,
# imports scikit-learn when it is there and goes on without it; this package must too.
_EASGD_GRAPH = """
import sys
for name in sys.argv[1:]:
    sys.modules[name] = None
import tensorflow as tf
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

tf.compat.v1.disable_v2_behavior()
cluster = tf.train.ClusterSpec({"ps": ["localhost:1"], "worker": ["localhost:2"]})
worker = "/job:worker/task:0"
getter = ElasticAverageCustomGetter(worker_device=worker)
with tf.compat.v1.device(
    tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster)
), tf.compat.v1.variable_scope("", custom_getter=getter):
    w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.ones_initializer())
    loss = tf.reduce_sum(w * w)
    opt = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1), num_worker=1, ea_custom_getter=getter
    )
    opt.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step())
opt.make_session_run_hook(is_chief=True, task_index=0)
opt.swapping_saver()
print(sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1:] and sys.modules[m]))
"""


def test_an_easgd_graph_loads_no_module_of_the_programs_extras():
    done = subprocess.run(
        [sys.executable, "-c", _EASGD_GRAPH, *EXTRA_MODULES],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECS,
        check=True,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


# Runs a console script's entry point as if `missing` were not installed: a None in
# sys.modules makes find_spec (and import) report the module absent.
_WITHOUT = """
import sys
sys.modules[sys.argv[2]] = None
from tf_contrib_easgd.{program} import main
sys.argv = [sys.argv[1], "--help"]
main()
"""


@pytest.mark.parametrize(
    ("program", "command", "missing", "extra"),
    [
        ("trainer", "easgd-train", "sklearn", "train"),
        ("trainer", "easgd-train", "portpicker", "train"),
        ("trainer", "easgd-train", "tqdm", "train"),
        ("trainer", "easgd-train", "psutil", "train"),
        ("migrate", "easgd-migrate", "libcst", "migrate"),
    ],
)
def test_a_console_script_without_its_extra_says_what_to_install_in_one_line(
    program, command, missing, extra
):
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(program=program), command, missing],
        check=False,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECS,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{command}: needs this package's {extra} extra "
        f"({'libcst' if extra == 'migrate' else 'scikit-learn, portpicker, tqdm, psutil'}): "
        f"pip install 'tf_contrib_easgd[{extra}]'"
    ]
