# syntax=docker/dockerfile:1
# mirrorflow's Airflow image for docker-compose.yaml: Airflow 3.3.2 with mirrorflow installed as users install
# it (the wheel's provider: the connection type, the Replication page, the DAG factories), at the exact versions
# of constraints.txt, and a Java runtime for spark-submit (the spark-submit engine runs the Spark driver in the
# task process, deploy-mode client).
#
# The build context is the repository (see .dockerignore): only the package sources are copied. docker-compose.yaml
# mounts dags/ (a few lines each) and include/config/ (the configuration) under /opt/airflow.
# Keep the Python version (3.11) equal to the Spark executors' (docker/spark.Dockerfile): PySpark
# refuses to run tasks when driver and worker Python minor versions differ.
FROM apache/airflow:3.3.2-python3.11

USER root
# openjdk-17-jre-headless: Debian bookworm, the base of the Airflow 3.3 images. The man1 folder is
# missing on slim images and the JRE's post-install script expects it.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    apt-get autoremove -yqq --purge; \
    apt-get clean; \
    rm -rf /var/lib/apt/lists/*; \
    java -version; \
    mkdir -p /opt/airflow/auth; \
    chown airflow:0 /opt/airflow/auth; \
    chmod 0770 /opt/airflow/auth
USER airflow

# apache-airflow is named again (the image's version) so pip never up- or downgrades it. The Spark provider pulls
# pyspark-client, whose files overwrite pyspark's Python side with an older version; reinstalling pyspark without
# dependencies puts it back (as `make install` does).
COPY --chown=airflow:0 pyproject.toml README.md constraints.txt /opt/mirrorflow-src/
COPY --chown=airflow:0 include/mirrorflow /opt/mirrorflow-src/include/mirrorflow
COPY --chown=airflow:0 include/mirrorflow_airflow /opt/mirrorflow-src/include/mirrorflow_airflow
RUN cd /opt/mirrorflow-src \
    && pip install --no-cache-dir -c constraints.txt "apache-airflow==3.3.2" ".[pyspark]" \
    && pip install --no-cache-dir --no-deps --force-reinstall "$(grep '^pyspark==' constraints.txt)" \
    && python -c "import mirrorflow_airflow, pyspark; print('mirrorflow', mirrorflow_airflow.__version__, 'pyspark', pyspark.__version__)" \
    && spark-submit --version
