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
# The suite runs on one worker process per core, at most four (pytest-xdist), one test file
# per worker at a time so that a file's fixtures run once; PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder
# The whole suite ends with its longest tests, so that a run's output (CI's included) says where its time went.
SLOWEST := --durations=25
BENCH_ARGS ?=
REHEARSE_ARGS ?=
# TensorFlow of Vertex AI's tf2-cpu.2-15 serving image, in its own environment: the
# rehearsal loads the pushed model with it (rehearsal/serving.py names the same version).
SERVING_TF := 2.15.1
SERVING_ENV := $(TOOLS)/serving-tf$(SERVING_TF)
SERVING_PY := $(SERVING_ENV)/bin/python
# TF-DF's inference ops for that TensorFlow, which TF Serving links and a plain TensorFlow
# lacks: the trees family's models need them (models/trees.py). The package alone, without
# its training dependencies: the rehearsal's serving scripts load the ops, not the package.
SERVING_TFDF := 1.8.1
SERVING_STAMP := $(SERVING_ENV)/.synced-tfdf$(SERVING_TFDF)

# TensorFlow's environment (Keras 2, quiet C++ logs) is set by models/__init__.py, which
# every entry point imports before TensorFlow.
# Byte-compile at install: this machine sets PYTHONDONTWRITEBYTECODE, and without .pyc
# files importing TFX takes several times longer.
export UV_COMPILE_BYTECODE := 1

# The project's image (Dockerfile, built from uv.lock) that every rehearsed task runs in;
# `make image GPU=1` builds the GPU variant. IMAGE names it.
IMAGE ?= localhost/pipeline:rehearsal
GPU ?=
# Podman's settings for this project (runc, the caller's resource limits), used by every
# podman command the project runs.
export CONTAINERS_CONF := $(CURDIR)/rehearsal/containers.conf

.PHONY: run test test-fast test-image test-flink-parts lint format bench rehearse image serving-env setup lock clean system-tools flink flink-down

run: $(STAMP)
	$(PY) local_runner.py $(RUN_ARGS)

test: $(STAMP) $(SERVING_STAMP) system-tools
	@$(MAKE) --no-print-directory --jobs 2 --output-sync=target test-image test-flink-parts
	$(PYTEST) $(SLOWEST) $(PYTEST_ARGS)

# Everything but the end-to-end pipeline runs.
test-fast: $(STAMP) $(SERVING_STAMP) system-tools
	@$(MAKE) --no-print-directory test-image
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

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

# The image, with podman (a debootstrap of Debian 12 stands in for the registry's base, made
# once); rebuilds only what changed. Prints its time and size, and checks it against uv.lock.
image: $(STAMP) system-tools
	$(PY) -m rehearsal.image --tag $(IMAGE) $(if $(GPU),--gpu)

# The suite's rehearsals run in the image: built before the tests (where podman could not be
# installed, they are skipped and say why).
test-image:
	@if command -v podman >/dev/null; then $(MAKE) --no-print-directory image; \
	else echo "podman is not installed: the tests that run containers will be skipped"; fi

# The Flink tests' parts (Flink, Beam's job server and its one-jar build), fetched before the
# tests as the image is built, beside it (fetching waits on the network, building on the
# CPU): `python -m flink_cluster fetch` checks each against its published checksum and keeps
# it under .tools/flink; a second call finds them there. Without Java and Maven the Flink
# tests are skipped and say why.
test-flink-parts:
	@if command -v java >/dev/null && command -v mvn >/dev/null; then \
		$(PY) -m flink_cluster fetch && $(PY) -m flink_cluster fat-job-server-jar >/dev/null; \
	else echo "java or mvn is not installed: the Flink tests will be skipped"; fi

# The compiled Vertex AI job of a problem (PROBLEM=data/penguins; the taxi one by default),
# executed here task by task as Vertex would, each task in a fresh container of the image,
# on the problem's data and contract
# (its folder is uploaded to gs://pipeline-rehearsal/data); then the pushed model answers a
# Vertex-style JSON request in TensorFlow $(SERVING_TF). `python kubeflow_runner.py --help`.
PROBLEM ?= data/taxi
rehearse: $(STAMP) $(SERVING_STAMP) image
	$(PY) kubeflow_runner.py --rehearse --problem $(PROBLEM) --image $(IMAGE) \
		--output-root gs://pipeline-rehearsal/outputs --data-root gs://pipeline-rehearsal/data \
		--rehearse-gcs gs://pipeline-rehearsal/data=$(PROBLEM) --serving-python $(SERVING_PY) $(REHEARSE_ARGS)

# A Flink 1.19 session cluster on this machine, as root (python -m flink_cluster --help): a
# JobManager and two TaskManagers, each host a network namespace, each TaskManager with a
# sidecar of the image running Beam's SDK worker pool; Flink's and Beam's parts fetched into
# .tools/flink against their published checksums. Prints the flags that run a Beam Python
# pipeline on it (Beam's Flink job server, EXTERNAL environment). `make flink-down` stops it.
flink: $(STAMP) image
	$(PY) -m flink_cluster fetch
	$(PY) -m flink_cluster up

flink-down: $(STAMP)
	$(PY) -m flink_cluster down

serving-env: $(SERVING_STAMP)

$(SERVING_PY): | $(UV)
	$(UV) venv --quiet --python $(PYTHON) $(SERVING_ENV)
	$(UV) pip install --quiet --python $(SERVING_PY) tensorflow-cpu==$(SERVING_TF)

$(SERVING_STAMP): $(SERVING_PY)
	$(UV) pip install --quiet --python $(SERVING_PY) --no-deps tensorflow-decision-forests==$(SERVING_TFDF)
	touch $@

setup: $(STAMP)

# Debian packages the project needs: Chromium, for the run report's browser test
# (tests/report/test_browser.py); strace, which records every connection a
# rehearsal makes (tests/rehearsal/test_rehearsal_end_to_end.py); podman, runc and
# debootstrap, which build the image and run the rehearsal's containers; Java 17 and
# Maven, which run the Flink cluster and resolve Beam's job server (flink_cluster/). Each
# as COMMAND:PACKAGE where they differ. Installed with apt-get as root (or through sudo);
# where neither works, the tests that need them are skipped and say why, and `make image`
# fails naming podman.
SYSTEM_TOOLS := chromium strace podman runc debootstrap java:openjdk-17-jre-headless mvn:maven
system-tools:
	@missing=; for tool in $(SYSTEM_TOOLS); do PATH="$$PATH:/usr/sbin:/sbin" command -v $${tool%%:*} >/dev/null \
		|| missing="$$missing $${tool#*:}"; done; \
	[ -z "$$missing" ] || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
			echo "not installed (not root, no sudo):$$missing; the tests that need them will be skipped"; exit 0; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
			|| echo "could not install$$missing: the tests that need them will be skipped"; }

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
