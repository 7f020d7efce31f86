"""Installs tf_contrib_easgd: Elastic Averaging SGD for TensorFlow 2.x on tf.compat.v1."""

import pathlib
import re

import setuptools

HERE = pathlib.Path(__file__).parent
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (HERE / "tf_contrib_easgd" / "__init__.py").read_text(), re.M
).group(1)

setuptools.setup(
    name="tf_contrib_easgd",
    version=VERSION,
    description="tf.contrib.opt.ElasticAverageOptimizer (EASGD) for TensorFlow 2.x graph mode",
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # The unit tests pass on 3.10.13, 3.11.7, 3.12.1 and 3.13.0 (README.md, Install).
    python_requires=">=3.10",
    packages=[
        "tf_contrib_easgd",
        "tf_contrib_easgd.cluster",
        "tf_contrib_easgd.eager",
        "tf_contrib_easgd.estimator",
        "tf_contrib_easgd.exchange",
        "tf_contrib_easgd.job",
        "tf_contrib_easgd.keras",
        "tf_contrib_easgd.migrate",
        "tf_contrib_easgd.runner",
        "tf_contrib_easgd.trainer",
    ],
    install_requires=[
        # Every minor release from 2.15 to 2.21 passes `make test-matrix` (docs/VERSIONS.md).
        "tensorflow>=2.15,<2.22",
        # TensorFlow 2.20 asks for protobuf>=5.28 with no cap, but its write_graph (run by a
        # chief's MonitoredTrainingSession) passes float_format, which protobuf 7 removed.
        # 2.15-2.19 cap it below 6 themselves; 2.21 accepts 6.31 and later.
        "protobuf<7",
        "absl-py>=1.0",
        "numpy",
    ],
    # The library alone needs only the above; each console script names its extra when a
    # package of it is missing (tests/subprocess/test_lean_install.py).
    extras_require={
        # easgd-train: the embedded 8x8 digits dataset, free loopback ports in local mode,
        # local mode's progress bar, a process's start time.
        "train": ["scikit-learn>=1.2", "portpicker>=1.6", "tqdm>=4.60", "psutil>=5.9"],
        # easgd-migrate: rewrites TF1 scripts keeping formatting and comments.
        "migrate": ["libcst>=1.1"],
        "test": [
            # pytest 9.2 gives items structured node ids, and pytest-xdist 3.8's loadgroup no
            # longer groups (pytest-dev/pytest-xdist#1386): the e2e tier's shared runs (the
            # contrib oracle, one Slurm) would each run once per worker.
            "pytest>=8,<9.2",
            "pytest-timeout>=2.2",
            "pytest-xdist>=3.5",
            "portpicker>=1.6",
            "psutil>=5.9",
            "ruff==0.17.6",
        ],
        # `tensorboard --logdir MODEL_DIR` (docs/TRAINING.md): TensorFlow up to 2.20 installs
        # the matching tensorboard release; TensorFlow 2.21 no longer does (constraints pin it).
        "tensorboard": ["tensorboard>=2.15,<2.22"],
        # tf_contrib_easgd.estimator: tf.estimator exists up to TensorFlow 2.15 only.
        "estimator": ["tensorflow>=2.15,<2.16", "tensorflow-estimator>=2.15,<2.16"],
        # benchmarks/: the PNG plots of BENCHMARKS.md, the cost model's fit (scipy also comes
        # with scikit-learn, so the tests of the scale report need no extra).
        "bench": ["matplotlib>=3.5", "scipy>=1.10"],
        # Migrated TF1 scripts that use tf.compat.v1.layers: on Keras 3 (TF 2.16 and later)
        # they need Keras 2 as the tf-keras package and TF_USE_LEGACY_KERAS=1 (easgd-migrate
        # sets it). Install the tf-keras release matching TensorFlow's (constraints pin it).
        # tf-slim: tf.contrib.slim's successor, which easgd-migrate rewrites slim code to
        # (its last release, 1.1.0; docs/MIGRATING.md says what it needs on TF 2.16+).
        "legacy-keras": ["tf-keras>=2.15,<2.22", "tf-slim>=1.1,<1.2"],
    },
    entry_points={
        "console_scripts": [
            "easgd-migrate=tf_contrib_easgd.migrate:main",
            "easgd-train=tf_contrib_easgd.trainer:main",
        ]
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
