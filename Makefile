# Every target creates .venv when it is missing and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: venv test test-tf215 bazel-test lint format demo bench bench-quick clean

venv: $(STAMP)

$(STAMP): setup.py pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[test,demo]'
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest $(PYTEST_ARGS)

# The same suite on TensorFlow 2.15.1 + tensorflow-estimator 2.15.0 (the oldest supported
# TensorFlow, the last with tf.estimator) in .venv-tf215; `make test` runs TF 2.21.
VENV215 := .venv-tf215
PY215 := $(VENV215)/bin/python
STAMP215 := $(VENV215)/.installed

$(STAMP215): setup.py pyproject.toml constraints-tf215.txt
	test -x $(PY215) || $(PYTHON) -m venv $(VENV215)
	$(PY215) -m pip install --quiet --upgrade pip
	$(PY215) -m pip install --quiet -c constraints-tf215.txt -e '.[test,demo,estimator]'
	touch $(STAMP215)

test-tf215: $(STAMP215)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY215) -m pytest $(PYTEST_ARGS)

# Builds the package and runs the suite with Bazel, offline; see docs/BAZEL.md.
bazel-test: $(STAMP)
	bazel test //... --python_path=$(abspath $(PY))

# The README's first command: easgd-train with its defaults (1 ps + 2 workers on this machine).
demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(VENV)/bin/easgd-train

# The benchmark suite (benchmarks/, BENCHMARKS.md); never part of `make test`. The
# bytes-on-the-wire section needs root and `ip netns` (a private network namespace); without
# them it is skipped with a message. `make bench` takes ~35 min and rewrites BENCHMARKS.md and
# benchmarks/results/; `make bench-quick` is a smoke run under 3 min writing to a temp folder.
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PIP) install --quiet -c constraints.txt -e '.[test,demo,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.run --out=benchmarks/results --report=BENCHMARKS.md

bench-quick: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.run --quick

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(VENV215) build *.egg-info .pytest_cache .ruff_cache
