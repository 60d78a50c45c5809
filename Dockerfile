# syntax=docker/dockerfile:1
# Sparkpoint images. Two targets from one file:
#   operator  the kopf operator (`sparkpoint-operator`): `sparkpoint[operator]`; no Java, no Spark.
#   runtime   a job's driver (`sparkpoint run JOB_FILE`) and its GC sidecar (`sparkpoint gc ...`):
#             `sparkpoint[runtime]`, JRE 17 headless and pyspark, laid out like Spark's own images (SPARK_HOME=/opt/spark,
#             WORKDIR /opt/spark/work-dir, uid 185) so Spark executors can later use it too.
# Both run as uid 185 and work with a read-only root file system: HOME and every cache point at
# /tmp (an emptyDir in the pods), bytecode is compiled at build time.
#
#   docker build --target operator -t sparkpoint/operator:dev .
#   docker build --target runtime  -t sparkpoint/runtime:dev .
# `make image` builds both with buildah from a Debian base made by debootstrap (--build-arg BASE).
# Python packages are pinned in image/constraints.txt (from pyproject.toml, scripts/lock-image.sh).
ARG BASE=python:3.11-slim-bookworm

# --- builder: wheels for every dependency and for sparkpoint itself --------------------------------
FROM ${BASE} AS builder
# Builds behind a TLS-intercepting proxy pass its CA bundle (mounted into the build) as PIP_CERT.
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Dependencies first, from pyproject.toml alone: source changes do not rebuild the pyspark wheel.
COPY pyproject.toml image/requirements.py image/constraints.txt ./
RUN python3 -m venv /opt/build \
 && python3 requirements.py pyproject.toml runtime > runtime.txt \
 && python3 requirements.py pyproject.toml operator > operator.txt \
 && /opt/build/bin/pip wheel --quiet --wheel-dir /wheels -c constraints.txt -r runtime.txt -r operator.txt
COPY setup.py README.md ./
COPY sparkpoint/ sparkpoint/
COPY runtime/ runtime/
COPY operator/ operator/
COPY plugin/ plugin/
RUN /opt/build/bin/pip wheel --quiet --no-deps --wheel-dir /wheels/self .

# One virtualenv per target, installed from the wheels only, then stripped of pip and setuptools
# (the final stages copy the venv and get no packaging or build tools).
FROM builder AS operator-venv
RUN python3 -m venv /opt/sparkpoint/venv \
 && /opt/sparkpoint/venv/bin/pip install --quiet --no-index --find-links /wheels -c constraints.txt -r operator.txt \
 && /opt/sparkpoint/venv/bin/pip install --quiet --no-index --no-deps /wheels/self/*.whl \
 && /opt/sparkpoint/venv/bin/pip uninstall --quiet --yes pip setuptools

FROM builder AS runtime-venv
RUN python3 -m venv /opt/sparkpoint/venv \
 && /opt/sparkpoint/venv/bin/pip install --quiet --no-index --find-links /wheels -c constraints.txt -r runtime.txt \
 && /opt/sparkpoint/venv/bin/pip install --quiet --no-index --no-deps /wheels/self/*.whl \
 && /opt/sparkpoint/venv/bin/pip uninstall --quiet --yes pip setuptools

# --- Spark's Kafka connector: the pinned set `spark-kafka` of jars.lock, each jar checked by sha256 --
FROM ${BASE} AS connector-jars
ARG PIP_CERT
COPY jars.lock scripts/fetch_jars.py /src/
RUN if [ -n "$PIP_CERT" ]; then export SSL_CERT_FILE="$PIP_CERT"; fi \
 && python3 /src/fetch_jars.py spark-kafka --lock /src/jars.lock --dest /opt/sparkpoint/jars

# --- common to both final images -----------------------------------------------------------------
FROM ${BASE} AS common
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.vendor="Sparkpoint" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sparkpoint/sparkpoint"
RUN groupadd --system --gid 185 sparkpoint \
 && useradd --system --uid 185 --gid 185 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin sparkpoint
ENV PATH=/opt/sparkpoint/venv/bin:$PATH \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8

# --- operator ------------------------------------------------------------------------------------
FROM common AS operator
LABEL org.opencontainers.image.title="sparkpoint-operator" \
      org.opencontainers.image.description="Sparkpoint Kubernetes operator (kopf)"
COPY --from=operator-venv /opt/sparkpoint/venv /opt/sparkpoint/venv
COPY crds/ /opt/sparkpoint/crds/
WORKDIR /tmp
# A user name for any uid (OpenShift-style random uids have no passwd entry): kopf's peering
# identity comes from getpass.getuser, which reads $USER first.
ENV USER=sparkpoint
USER 185:185
EXPOSE 9100
ENTRYPOINT ["sparkpoint-operator"]

# --- runtime -------------------------------------------------------------------------------------
FROM common AS runtime
LABEL org.opencontainers.image.title="sparkpoint-runtime" \
      org.opencontainers.image.description="Sparkpoint job runtime and GC sidecar (PySpark, JRE 17)"
# Debian's JRE: apt pins are not kept (the security archive drops superseded versions); the
# image records the installed version in /opt/sparkpoint/jre-version.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini libnss-wrapper \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && mkdir -p /opt/sparkpoint \
 && dpkg-query -W -f '${Version}\n' openjdk-17-jre-headless > /opt/sparkpoint/jre-version \
 && ln -s "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /usr/lib/jvm/java-17
COPY --from=runtime-venv /opt/sparkpoint/venv /opt/sparkpoint/venv
COPY --from=connector-jars /opt/sparkpoint/jars /opt/sparkpoint/jars
# The examples' own modules (examples/kafka_to_delta.py): a StreamingJob names the folder in job.pythonPath.
COPY examples/*.py /opt/sparkpoint/examples/
# Spark's image layout on top of the pip-installed pyspark: SPARK_HOME's bin, sbin and jars are
# the wheel's own; work-dir is the (writable) working directory.
RUN pyspark_dir="$(find /opt/sparkpoint/venv/lib -maxdepth 3 -type d -name pyspark -path '*site-packages*')" \
 && mkdir -p /opt/spark/work-dir /var/lib/sparkpoint \
 && for d in bin sbin jars; do ln -s "$pyspark_dir/$d" "/opt/spark/$d"; done \
 && chown 185:185 /opt/spark/work-dir /var/lib/sparkpoint
# USER: a user name for Python under any uid; the JVM gets one from nss_wrapper (libnss-wrapper
# above), set up by the runtime before Spark starts (runtime/spark/identity.py, docs/image.md).
# SPARKPOINT_SPARK_JARS_DIR: the runtime adds these jars to spark.jars (runtime/spark/session.py).
ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    SPARK_HOME=/opt/spark \
    SPARKPOINT_SPARK_JARS_DIR=/opt/sparkpoint/jars \
    USER=sparkpoint
WORKDIR /opt/spark/work-dir
USER 185:185
EXPOSE 8080 9090 9091
ENTRYPOINT ["/usr/bin/tini", "--", "sparkpoint"]
