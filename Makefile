# Every target creates .venv when it is missing and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed

.PHONY: venv test test-unit test-tf215 test-contrib bazel-test lint format demo bench bench-quick clean

venv: $(STAMP)

$(STAMP): setup.py pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[test,train,migrate,legacy-keras]'
	touch $(STAMP)

# Two runs, the tiers by folder (tests/README.md), each on both cores (pytest-xdist): every
# tier but tests/e2e, then tests/e2e two tests at a time (a test's ps/worker processes keep
# ~1.3 cores busy on average: much of an e2e test is TensorFlow's start-up and waits).
# Tests that share a costly fixture (the contrib oracle, one Slurm) name an xdist_group,
# which `--dist loadgroup` honours; pytest-xdist 3.8.0's loadgroup hangs when it replaces a
# crashed worker (pytest-dev/pytest-xdist#1323, fixed after 3.8.0), so that run replaces
# none (a crash fails the run at once, as it would without xdist), and the other tiers,
# which need no groups, use `--dist load`, which replaces crashed workers cleanly.
# Exit code 5 (PYTEST_ARGS selected nothing in a run) is no failure.
NOT_E2E := tests/unit tests/cluster tests/subprocess tests/tools
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest $(NOT_E2E) -n 2 --dist load $(PYTEST_ARGS) \
	  || [ $$? -eq 5 ]
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest tests/e2e -n 2 --dist loadgroup --max-worker-restart=0 \
	  $(PYTEST_ARGS) \
	  || [ $$? -eq 5 ]

# The unit tests, lint first: tests/unit, and the tests of the repository's tools
# (tests/tools) that start no child process: ~2200 tests in ~65 s (TF 2.21), a quick check
# while editing; `make test` runs everything.
test-unit: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest tests/unit tests/tools -m "not subprocess" $(PYTEST_ARGS)

# The same suite on TensorFlow 2.15.1 + tensorflow-estimator 2.15.0 (the oldest supported
# TensorFlow, the last with tf.estimator) in .venv-tf215; `make test` runs TF 2.21.
VENV215 := .venv-tf215
PY215 := $(VENV215)/bin/python
STAMP215 := $(VENV215)/.installed

$(STAMP215): setup.py pyproject.toml constraints-tf215.txt
	test -x $(PY215) || $(PYTHON) -m venv $(VENV215)
	$(PY215) -m pip install --quiet --upgrade pip
	$(PY215) -m pip install --quiet -c constraints-tf215.txt -e '.[test,train,migrate,estimator,legacy-keras]'
	touch $(STAMP215)

test-tf215: $(STAMP215)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY215) -m pytest $(PYTEST_ARGS)

# Differential tests against the original tf.contrib.opt.ElasticAverageOptimizer
# (tests/e2e/test_contrib_oracle.py, tests/e2e/test_checkpoint_compat.py): the scenarios
# of tests/support/contrib_scenarios.py run on TensorFlow 1.15 with contrib in .venv-tf115
# and here, and the results are compared. .venv-tf115 needs a Python 3.7: PYTHON37, else pyenv's newest 3.7,
# else python3.7 on PATH; with none, the target says so and succeeds. `make test` and
# `make test-tf215` run these tests too once .venv-tf115 exists (they skip without it).
VENV115 := .venv-tf115
STAMP115 := $(VENV115)/.installed
PYENV_ROOT ?= $(HOME)/.pyenv
FIND_PYTHON37 := for python in $${PYTHON37:-} \
	  $$(ls -d $(PYENV_ROOT)/versions/3.7*/bin/python 2>/dev/null | sort -V -r) \
	  $$(command -v python3.7); do \
	  "$$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 7))' 2>/dev/null \
	    && { echo "$$python"; break; }; \
	done

$(STAMP115): constraints-tf115.txt
	@python37=$$($(FIND_PYTHON37)); \
	test -n "$$python37" || { echo "no Python 3.7 for $(VENV115)"; exit 1; }; \
	test -x $(VENV115)/bin/python || { echo "$$python37 -m venv $(VENV115)"; "$$python37" -m venv $(VENV115); }
	$(VENV115)/bin/python -m pip install --quiet -c constraints-tf115.txt \
	  tensorflow==1.15.5 protobuf==3.20.3 portpicker
	touch $(STAMP115)

NO_PYTHON37 := no Python 3.7 found (PYTHON37, $(PYENV_ROOT)/versions/3.7*, python3.7 on \
  PATH); TensorFlow 1.15, the original contrib, needs one.

test-contrib: $(STAMP)
	@if [ -z "$$($(FIND_PYTHON37))" ]; then \
	  echo "test-contrib: SKIPPED: $(NO_PYTHON37)"; \
	else \
	  $(MAKE) --no-print-directory $(STAMP115) && \
	  TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m pytest tests/e2e/test_contrib_oracle.py \
	    tests/e2e/test_checkpoint_compat.py $(PYTEST_ARGS); \
	fi

# Only .venv-tf115, where a Python 3.7 exists (else it says so and succeeds): CI builds it
# first, so that `make test` and `make bazel-test` run the differential tests in their pass.
.PHONY: venv-tf115
venv-tf115:
	@if [ -z "$$($(FIND_PYTHON37))" ]; then \
	  echo "venv-tf115: SKIPPED: $(NO_PYTHON37)"; \
	else \
	  $(MAKE) --no-print-directory $(STAMP115); \
	fi

# Builds the package and runs the suite with Bazel, offline; see docs/BAZEL.md. The
# interpreter is $(BAZEL_VENV)'s: `make bazel-test BAZEL_VENV=$(VENV215)` runs the targets on
# TensorFlow 2.15 with tf.estimator, the suite of `make test-tf215` under Bazel (what CI does).
BAZEL_VENV ?= $(VENV)
bazel-test: $(BAZEL_VENV)/.installed
	bazel test //... --python_path=$(abspath $(BAZEL_VENV)/bin/python)

# The README's first command: easgd-train with its defaults (1 ps + 2 workers on this machine,
# in a private network namespace where the machine allows one: README.md, "Security").
demo: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(VENV)/bin/easgd-train

# The benchmark suite (benchmarks/, BENCHMARKS.md; benchmarks/README.md maps each section to
# its module and target); never part of `make test`. The bytes-on-the-wire section needs
# root and `ip netns` (a private network namespace), the shaped network and the pinned run
# also `tc`; without them they are skipped with a message. The side by side with the
# original contrib needs .venv-tf115 (`make test-contrib` builds it), its rows of 2 ps tasks
# on 1 Gbit/s links also root, `ip netns` and `tc`; without them, they are skipped with a
# message. `make bench` (52 min at 28a3faf) runs every section and rewrites
# BENCHMARKS.md and benchmarks/results/; `make bench-quick` is a smoke run under 5 min
# writing to a temp folder. `make bench-SECTION` measures one section alone (the name under
# its heading in BENCHMARKS.md; bench-contrib ~9 min with its 2-ps rows) and merges it into
# benchmarks/results/results.json and BENCHMARKS.md, keeping the other sections' figures.
BENCH_SECTIONS := throughput bytes accuracy overhead keras exchange shaped pinned contrib
BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PIP) install --quiet -c constraints.txt -e '.[test,train,migrate,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.run --out=benchmarks/results --report=BENCHMARKS.md

bench-quick: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.run --quick

.PHONY: $(addprefix bench-,$(BENCH_SECTIONS))
$(addprefix bench-,$(BENCH_SECTIONS)): bench-%: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.run --sections=$* --merge \
	  --out=benchmarks/results --report=BENCHMARKS.md

# `make bench-tuning` (~17 min) measures the grid of communication period, moving rate and
# rho of docs/TUNING.md (benchmarks/tuning.py) and rewrites benchmarks/results/tuning.* and
# the generated block of docs/TUNING.md (the advice around it is kept).
.PHONY: bench-tuning
bench-tuning: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.tuning --out=benchmarks/results \
	  --report=docs/TUNING.md

# `make bench-scale` (~35 min) runs the scale harness of docs/SCALING.md (benchmarks/scale.py):
# 2 to 64 workers against 1, 2 and 4 ps tasks, the cost model beside every point, and what a
# 64-worker job needs besides exchanges; it rewrites benchmarks/results/scale.* and the
# generated block of docs/SCALING.md. Never part of `make test` (tests/e2e/test_scale.py runs its
# --quick smoke run). Shaped links need root, `ip netns` and `tc`; without them, unshaped.
.PHONY: bench-scale
bench-scale: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.scale --out=benchmarks/results \
	  --report=docs/SCALING.md

# `make bench-strategies` (88 min at 34cb98d on a quiet 2-core machine: 174 training runs
# of ~30 s, a third of it TensorFlow's start-up) sets EASGD beside TF 2's
# ParameterServerStrategy and MultiWorkerMirroredStrategy with the same Keras model
# (benchmarks/strategies.py): it picks each contender's learning rate on loopback, then
# measures loopback, 1 Gbit/s and 100 Mbit/s links (these need root, `ip netns` and `tc`; without them loopback alone), and rewrites
# benchmarks/results/strategies.* and its generated block of BENCHMARKS.md, which `make bench`
# keeps. `python -m benchmarks.strategies --quick` is its smoke run (~4 min quiet).
.PHONY: bench-strategies
bench-strategies: $(BENCH_STAMP)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m benchmarks.strategies --out=benchmarks/results \
	  --report=BENCHMARKS.md

# The chaos soak (soak/, docs/RELIABILITY.md "Chaos soak"); never part of `make test`. About
# 11 min: 1 ps + 3 workers of easgd-train, each in a network namespace of its own, under a
# seeded schedule of 20 faults (kills and restarts, SIGSTOP/SIGCONT, cut links); it prints
# what each fault cost and a verdict, and exits 1 when a check fails. Needs root and
# iproute2's `ip netns`: without them it says so and exits 2. More flags in SOAK_ARGS, e.g.
# make soak SOAK_ARGS="--seed=7 --out=/tmp/soak.json" (python -m soak --help lists them).
.PHONY: soak
soak: $(STAMP)
	@if [ "$$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1; then \
	  echo "make soak: needs root and iproute2's 'ip netns' (each task runs in a network" \
	    "namespace of its own, whose link the soak cuts): run it as root (sudo make soak)." >&2; \
	  exit 2; \
	fi
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) -m soak $(SOAK_ARGS)

# The unit and in-process cluster tests on every TensorFlow minor release from 2.15 to 2.21
# and every Python from 3.10 to 3.13 with a wheel, each in a new virtual environment
# (tools/test_matrix.py); rewrites the table of docs/VERSIONS.md. About two hours; not in CI.
.PHONY: test-matrix
test-matrix: $(STAMP)
	$(PY) tools/test_matrix.py $(MATRIX_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) $(VENV215) $(VENV115) build *.egg-info .pytest_cache .ruff_cache
