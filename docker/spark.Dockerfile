# syntax=docker/dockerfile:1
# The Spark standalone master and workers of docker-compose.yaml: the official Apache Spark image of
# the same Spark version as pyproject.toml's pyspark (the driver runs in Airflow's task process; a
# driver and a cluster of different Spark versions do not talk reliably), plus what mirrorflow's
# tasks import on the executors: confluent-kafka, pinned as in pyproject.toml.
#
# The code itself (mirrorflow) is not copied in: docker-compose.yaml mounts the repository
# read-only at /opt/mirrorflow and sets PYTHONPATH=/opt/mirrorflow.
FROM apache/spark:4.3.0-scala2.13-java17-python3-ubuntu

# PySpark refuses to run a task whose Python minor version differs from the driver's, and the driver
# runs in the Airflow image (Python 3.11) while this image's Ubuntu ships another python3. So the
# executors get Python 3.11 (deadsnakes) in a virtualenv that comes first on PATH: the Airflow side
# sets PYSPARK_PYTHON=python3, which executors resolve to this venv's interpreter.
ARG PYTHON_VERSION=3.11
ENV MIRRORFLOW_VENV=/opt/mirrorflow-venv

USER root
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends software-properties-common gpg-agent; \
    add-apt-repository -y ppa:deadsnakes/ppa; \
    apt-get update; \
    apt-get install -y --no-install-recommends "python${PYTHON_VERSION}" "python${PYTHON_VERSION}-venv"; \
    rm -rf /var/lib/apt/lists/*; \
    "python${PYTHON_VERSION}" -m venv "${MIRRORFLOW_VENV}"; \
    "${MIRRORFLOW_VENV}/bin/pip" install --no-cache-dir "confluent-kafka==2.16.1"; \
    "${MIRRORFLOW_VENV}/bin/python" -c "import confluent_kafka; print('confluent-kafka', confluent_kafka.version())"
ENV PATH="${MIRRORFLOW_VENV}/bin:${PATH}" \
    PYSPARK_PYTHON=python3
USER spark
