"""spark-submit entry point: mirror one topic family of one flow (thin: the logic is in the library).

    spark-submit .../mirrorflow/spark_app/mirror_family.py --config mm2.properties --flow primary->backup \
        --family orders [--duration 10m] [--topics a,b] [--report report.json] [--debug]

Run it with ``--py-files`` naming the ``mirrorflow`` package zip (``mirrorflow.replication.pyfiles``; the CLI
and the Airflow operator do): a cluster's workers then need only a Python with confluent-kafka.

Both clusters are checked (``mirrorflow.cluster.timeout``) before the SparkSession starts, so a dead cluster
costs seconds, not a Spark start-up, and is named in one line. Exit code 0 when every partition copied
cleanly, 1 for a problem to fix or failed partitions (the report says which and why), 2 when the run could
not run (a cluster unreachable, an unexpected error: one line, also in the report; ``--debug`` for the
traceback). spark-submit passes the code on; its launcher merges this app's stderr into its stdout.
"""

from __future__ import annotations

import argparse
import logging
import sys

# Shipped with the job (--py-files: the CLI and the Airflow operator pass the package zip) or installed.
from mirrorflow.replication.entry import main

if __name__ == "__main__":
    # One write per line: spark-submit merges this app's stdout with the JVM's log lines on one pipe, and a block
    # buffer split mid-line glued the report's last line to Spark's next one in the Airflow task log.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main(argparse.ArgumentParser(prog="mirror_family"), spark=True))
