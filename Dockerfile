# One image for the operator, the job runtime and the GC sidecar (the command picks the role):
#   operator:   kopf run -m sparkpoint.operator.handlers   (next wave)
#   runtime:    sparkpoint run /etc/sparkpoint/job.yaml
#   gc sidecar: sparkpoint gc --store ... --job NS/NAME
FROM python:3.11-slim-bookworm

# Spark 4 needs Java 17+; procps gives Spark's launch scripts `ps`.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/sparkpoint
# Dependencies first (from an empty package skeleton) so that code changes do not re-install pyspark.
COPY pyproject.toml setup.py README.md ./
RUN mkdir -p sparkpoint runtime operator \
 && touch sparkpoint/__init__.py runtime/__init__.py operator/__init__.py \
 && pip install . && pip uninstall -y sparkpoint
COPY sparkpoint/ sparkpoint/
COPY runtime/ runtime/
COPY operator/ operator/
RUN pip install --no-deps .
COPY examples/ examples/
COPY crds/ crds/

# Non-root by default; the hot checkpoint dir is an emptyDir mounted at /var/lib/sparkpoint.
RUN useradd --uid 10001 --create-home sparkpoint && mkdir -p /var/lib/sparkpoint \
 && chown sparkpoint /var/lib/sparkpoint
USER 10001
ENV PYTHONPATH=/opt/sparkpoint
EXPOSE 8080
ENTRYPOINT ["sparkpoint"]
