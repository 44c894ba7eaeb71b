# The image every task of the compiled pipeline runs in (Vertex AI Pipelines, Kubeflow
# Pipelines v2, Vertex AI Training replicas), built from uv.lock: the same Python minor
# version and the same packages as `make test` (tests/rehearsal/test_image.py
# compares them). `make image` builds it here with podman; a cloud build is
# `gcloud builds submit --config cloudbuild.yaml` (docs/image.md).
#
# Layers: the base (Debian 12 with Python 3.11), then the locked environment, which is
# rebuilt only when pyproject.toml or uv.lock change, then the project's code.
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

# The locked environment in one layer, rebuilt only when the manifest changes. A C++
# compiler and Python's headers are needed to build it (pyfarmhash is an sdist) and are
# removed in the same step, with uv itself: none of them is in the image.
FROM base AS image
ARG UV_VERSION=0.13.8
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
    apt-get purge -y -qq --auto-remove python3.11-venv python3.11-dev g++ >/dev/null; \
    rm -rf /tmp/uv /tmp/uv-*.lock /build /var/lib/apt/lists/*

# `python` in a task's command is the locked environment's. Tasks run Keras 2 (tf-keras),
# as local runs do.
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv \
    TF_USE_LEGACY_KERAS=1

# The compiled spec refers to user code by module path (models.trainer.run_fn,
# models.preprocessing.preprocessing_fn, components.anomaly_gate...), which import
# runtime.speedups: the project's packages go on the import path.
WORKDIR /pipeline
COPY models/ /pipeline/models/
COPY pipeline/ /pipeline/pipeline/
COPY components/ /pipeline/components/
COPY runtime/ /pipeline/runtime/
ENV PYTHONPATH=/pipeline

# Dataflow starts Beam's SDK harness in the workers' container (--sdk_container_image) through
# the image's entrypoint, /opt/apache/beam/boot, which only Beam's own SDK images hold: copied
# from the one of the lock's Beam version and this Python (tests/rehearsal/test_image.py
# checks both). Vertex gives every task and training replica its own command, which replaces
# the entrypoint. Here, where no registry is reachable, `make image` builds the `image`
# stage above: the same image without these two lines.
FROM docker.io/apache/beam_python3.11_sdk:2.61.0 AS beam-sdk
FROM image
COPY --from=beam-sdk /opt/apache/beam /opt/apache/beam
ENTRYPOINT ["/opt/apache/beam/boot"]
