# Two commands do all set-up on a fresh Debian 12 / Python 3.11 machine:
#   make run   install what is needed, run the pipeline locally, print a summary
#   make test  install what is needed, run the test suite
# A second call finds the environment up to date (it is stamped against uv.lock) and
# starts at once.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
UV_VERSION := 0.13.8
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
STAMP := $(VENV)/.synced
PY := $(VENV)/bin/python
RUN_ARGS ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=

# TensorFlow's environment (Keras 2, quiet C++ logs) is set by models/__init__.py, which
# every entry point imports before TensorFlow.
# Byte-compile at install: this machine sets PYTHONDONTWRITEBYTECODE, and without .pyc
# files importing TFX takes several times longer.
export UV_COMPILE_BYTECODE := 1

.PHONY: run test test-fast lint format bench setup lock clean

run: $(STAMP)
	$(PY) local_runner.py $(RUN_ARGS)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# Everything but the end-to-end pipeline runs.
test-fast: $(STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# Lint and format check (ruff, configured in pyproject.toml); `make format` fixes what it can.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Benchmark at several data sizes (python -m bench --help); writes outputs/bench/results.{json,md}.
bench: $(STAMP)
	$(PY) -m bench $(BENCH_ARGS)

setup: $(STAMP)

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(STAMP): uv.lock pyproject.toml | $(UV)
	$(UV) sync --frozen --python $(PYTHON)
	touch $(STAMP)

# Re-resolve after editing pyproject.toml dependencies; commit the new uv.lock.
lock: | $(UV)
	$(UV) lock --python $(PYTHON)

clean:
	rm -rf outputs .pytest_cache
