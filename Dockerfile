# The image every task of the compiled pipeline runs in (Vertex AI Pipelines, Kubeflow
# Pipelines v2, Vertex AI Training replicas), built from uv.lock: the same Python minor
# version and the same packages as `make test` (tests/rehearsal/test_image.py
# compares them). `make image` builds it here with podman; a cloud build is
# `gcloud builds submit --config cloudbuild.yaml` (docs/image.md).
#
# Layers: the base (Debian 12 with Python 3.11), then the locked environment, which is
# rebuilt only when pyproject.toml or uv.lock change, then Beam's boot, the entrypoint, built
# in a stage of its own from Beam's Go sources at the lock's Beam version (rebuilt only when
# that version changes), then the project's code. A cloud build and `make image` build the
# same stages.
#
# Behind a TLS-intercepting proxy, give its certificate authorities as the build secret
# `ca` (podman/docker build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt): they are
# used by the steps that download and never stored in the image. Without it the image's
# own authorities are used.

# Debian 12, a dated tag a cloud build pulls; here `podman build --from` stands in a
# debootstrap of the same release for it (rehearsal/image.py).
FROM docker.io/library/debian:bookworm-20251229-slim AS base
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends python3.11 ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# The dependency manifest: uv.lock, and pyproject.toml without its tool settings (ruff's,
# pytest's), so that editing those does not rebuild the environment below.
FROM base AS manifest
COPY pyproject.toml uv.lock /src/
RUN mkdir /build && cp /src/uv.lock /build/ && python3.11 -c "import re; text = open('/src/pyproject.toml').read(); \
    sections = re.split(r'(?m)^(?=\[)', text); \
    print(''.join(s for s in sections if not s.startswith('[tool.') or s.startswith('[tool.uv]')), end='')" \
    > /build/pyproject.toml
# The lock's Beam version, for the boot stage below, which rebuilds only when it changes.
RUN python3.11 -c "import tomllib; lock = tomllib.load(open('/src/uv.lock', 'rb')); \
    print(next(p['version'] for p in lock['package'] if p['name'] == 'apache-beam'))" > /beam-version

# Beam's SDK harness entrypoint, /opt/apache/beam/boot, built from Beam's own Go sources at the
# lock's Beam version (`go install` of its module from the Go module proxy, whose checksums Go
# verifies against its checksum database), with the license files of Beam and of every Go
# module linked in, as Beam's own SDK images hold them. Debian 12's Go (1.19) is older than
# Beam's go.mod asks (1.21); its backports have Go 1.23. Nothing of Go is in the image.
FROM base AS boot
ARG GO_PACKAGE=golang-1.23-go=1.23.5-1~bpo12+1
RUN echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/backports.list \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends ${GO_PACKAGE} >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY --from=manifest /beam-version /build/beam-version
RUN --mount=type=secret,id=ca --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca SSL_CERT_FILE=/run/secrets/ca; fi; \
    set -e; \
    export PATH=$(ls -d /usr/lib/go-*/bin):$PATH CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath; \
    module=github.com/apache/beam/sdks/v2; version=v$(cat /build/beam-version); \
    GOBIN=/build go install "$module/python/container@$version"; \
    mkdir -p /opt/apache/beam/third_party_licenses/golang; \
    mv /build/container /opt/apache/beam/boot; \
    cd "$(go env GOMODCACHE)/$module@$version"; \
    cp LICENSE /opt/apache/beam/LICENSE; \
    go list -deps -f '{{with .Module}}{{.Path}} {{.Dir}}{{end}}' ./python/container | sort -u | \
    while read -r path dir; do \
        [ "$path" = "$module" ] && continue; \
        mkdir -p "/opt/apache/beam/third_party_licenses/golang/$path"; \
        find "$dir" -maxdepth 1 -type f \( -iname 'licen[cs]e*' -o -iname 'copying*' -o -iname 'notice*' \) \
            -exec cp {} "/opt/apache/beam/third_party_licenses/golang/$path/" \; ; \
    done

# The locked environment in one layer, rebuilt only when the manifest changes. A C++
# compiler and Python's headers are needed to build it (pyfarmhash is an sdist) and are
# removed in the same step, with uv itself: none of them is in the image. pip is added
# after the sync: Beam's boot installs a job's staged packages with it, and checks with
# `pip show` that Beam is installed before starting a worker.
FROM base AS image
ARG UV_VERSION=0.13.8
ARG PIP_VERSION=26.3
# Which of the lock's dependency groups to add (`gpu` for the GPU variant: CUDA wheels).
ARG LOCK_GROUPS=""
COPY --from=manifest /build/ /build/
RUN --mount=type=secret,id=ca --mount=type=cache,target=/root/.cache/uv \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca SSL_CERT_FILE=/run/secrets/ca; fi; \
    set -e; \
    apt-get update -qq; \
    apt-get install -y -qq --no-install-recommends python3.11-venv python3.11-dev g++ >/dev/null; \
    python3.11 -m venv /tmp/uv; \
    /tmp/uv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check uv==${UV_VERSION}; \
    cd /build; \
    UV_PROJECT_ENVIRONMENT=/opt/venv UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy \
        /tmp/uv/bin/uv sync --frozen --no-dev --no-install-project --python /usr/bin/python3.11 \
        $(for g in ${LOCK_GROUPS}; do printf -- '--group %s ' "$g"; done); \
    UV_LINK_MODE=copy /tmp/uv/bin/uv pip install --quiet --python /opt/venv/bin/python --compile-bytecode \
        pip==${PIP_VERSION}; \
    apt-get purge -y -qq --auto-remove python3.11-venv python3.11-dev g++ >/dev/null; \
    rm -rf /tmp/uv /tmp/uv-*.lock /build /var/lib/apt/lists/*

# `python` in a task's command is the locked environment's. Tasks run Keras 2 (tf-keras),
# as local runs do. Beam's boot runs its SDK workers with that `python` too: without
# RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT it would make a venv for each worker from the
# interpreter under /opt/venv, which does not see the locked environment's packages.
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv \
    TF_USE_LEGACY_KERAS=1 \
    RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1

# Python's cyclic garbage collector in every process of the image (tasks, training replicas,
# Beam's SDK workers): its first generation collected every 100,000 allocations rather than
# Python's 700. Each process starts by importing TensorFlow, TFX and Beam, and at the default
# about a sixth of that CPU goes to collections (docs/image.md). A .pth line runs as each
# interpreter starts; PIPELINE_SPEEDUPS=0 (or off, false, no) keeps Python's default, as it
# keeps every library as shipped.
RUN echo "import gc, os; os.environ.get('PIPELINE_SPEEDUPS', '1').strip().lower() in {'0', 'off', 'false', 'no'} or gc.set_threshold(100000, *gc.get_threshold()[1:])" \
    > /opt/venv/lib/python3.11/site-packages/pipeline-collector.pth

# The image's entrypoint is Beam's SDK harness container entrypoint, as in Beam's own SDK
# images: Dataflow's workers (--sdk_container_image) and Flink's SDK workers (a DOCKER
# environment, or an EXTERNAL one served by `boot --worker_pool`) start it. Vertex gives
# every task and training replica its own command, which replaces the entrypoint.
COPY --from=boot /opt/apache/beam/ /opt/apache/beam/
ENTRYPOINT ["/opt/apache/beam/boot"]

# The compiled spec refers to user code by module path (models.trainer.run_fn,
# models.preprocessing.preprocessing_fn, components.anomaly_gate...), which import
# runtime.speedups: the project's packages go on the import path.
WORKDIR /pipeline
COPY models/ /pipeline/models/
COPY pipeline/ /pipeline/pipeline/
COPY components/ /pipeline/components/
COPY runtime/ /pipeline/runtime/
ENV PYTHONPATH=/pipeline
