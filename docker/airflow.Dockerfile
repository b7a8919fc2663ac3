# syntax=docker/dockerfile:1
# mirrorflow's Airflow image for docker-compose.yaml: Airflow 3.3.2 with the project's runtime
# dependencies, pinned exactly as in pyproject.toml, and a Java runtime for spark-submit (the mirror
# DAGs' SparkSubmitOperator runs the Spark driver in the task process, deploy-mode client).
#
# The project's code is not copied in: docker-compose.yaml mounts dags/, plugins/, include/ and
# spark_apps/ under /opt/airflow, so the build context is docker/ alone.
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

# apache-airflow is named again (same version as the image) so pip never up- or downgrades it.
# The Spark provider pulls pyspark-client, whose files overwrite pyspark's Python side with an older
# version; reinstalling pyspark without dependencies puts it back (as `make install` does).
RUN pip install --no-cache-dir \
        "apache-airflow==3.3.2" \
        "apache-airflow-providers-apache-spark==6.3.4" \
        "pyspark==4.3.0" \
        "pandas==2.3.3" \
        "confluent-kafka==2.16.1" \
        "interegular==0.3.3" \
    && pip install --no-cache-dir --no-deps --force-reinstall "pyspark==4.3.0" \
    && python -c "import pyspark, sys; v = pyspark.__version__; sys.exit(0 if v == '4.3.0' else 'pyspark is ' + v)" \
    && spark-submit --version
