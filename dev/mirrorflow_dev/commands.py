"""The ``mirrorflow dev`` and ``mirrorflow demo`` commands, added to the CLI from a checkout.

The product's CLI finds :func:`register` through the ``mirrorflow.commands`` entry point group, so the installed
wheel has neither command and never imports this package.
"""

from __future__ import annotations

import argparse
import json
import sys

from mirrorflow.cli import local_spark_connect


def _dev(args: argparse.Namespace) -> int:
    from mirrorflow_dev.devcluster import DEFAULT_CLUSTERS, ClusterSpec, DevClusterError, DevClusters

    specs = DEFAULT_CLUSTERS
    if args.clusters:
        try:
            specs = tuple(
                ClusterSpec(alias, int(port))
                for alias, port in (item.split(":", 1) for item in args.clusters.split(","))
            )
        except ValueError:
            print(f"--clusters must look like primary:19092,backup:29092, not '{args.clusters}'", file=sys.stderr)
            return 1
    clusters = DevClusters(specs=specs)
    try:
        statuses = {"up": clusters.up, "down": clusters.down, "status": clusters.status}[args.action]()
    except DevClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for status in statuses:
        state = "running" if status.running else "stopped"
        answers = ", answers" if status.answers else ""
        pid = f" pid {status.pid}" if status.pid else ""
        print(
            f"{status.alias:<10} {status.bootstrap:<22} {state}{answers}{pid}  {status.detail}  data {status.data_dir}"
        )
    local_spark_connect(args.action)
    if args.action == "status" and not all(s.running for s in statuses):
        return 3  # like `systemctl status`: not everything is running
    return 0


def _demo(args: argparse.Namespace) -> int:
    from mirrorflow_dev.demo.stack import demo_down, demo_status, demo_up

    if args.demo_command == "up":
        return demo_up(start_timeout_s=args.start_timeout)
    return {"down": demo_down, "status": demo_status}[args.demo_command]()


def _demo_traffic(args: argparse.Namespace) -> int:
    import logging

    from mirrorflow_dev.demo.traffic import DEFAULT_RATE, run_traffic
    from mirrorflow_dev.devcluster import DevClusterError, wait_for_kafka

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s")
    try:
        wait_for_kafka(args.bootstrap, timeout=60)
    except DevClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    counts = run_traffic(args.bootstrap, rate=args.rate or DEFAULT_RATE, duration=args.duration)
    print(json.dumps(counts), flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``dev`` and ``demo`` to the ``mirrorflow`` command's subparsers."""
    dev = sub.add_parser("dev", help="local Kafka clusters for development (noida-db)")
    dev.add_argument("action", choices=["up", "down", "status"])
    dev.add_argument("--clusters", help="alias:port list (default primary:19092,backup:29092)")
    dev.set_defaults(func=_dev)

    _add_demo_parser(sub)


def _add_demo_parser(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="the local demo: clusters, Airflow with the mirror DAGs, demo traffic")
    demo_sub = demo.add_subparsers(dest="demo_command", required=True)
    up = demo_sub.add_parser("up", help="start everything (idempotent) and print the UI address and login")
    up.add_argument(
        "--start-timeout",
        type=float,
        metavar="SECONDS",
        help="how long to wait for Airflow to report healthy (default: $MIRRORFLOW_DEMO_START_TIMEOUT, else 300)",
    )
    up.set_defaults(func=_demo)
    for name, text in (
        ("down", "stop what the demo started, by recorded PID (idempotent)"),
        ("status", "what runs, end offsets on both clusters, consumer lag (exit 3 if not all running)"),
    ):
        demo_sub.add_parser(name, help=text).set_defaults(func=_demo)
    traffic = demo_sub.add_parser("traffic", help="produce demo records and run demo consumer groups until stopped")
    traffic.add_argument("--bootstrap", required=True, help="bootstrap servers of the cluster to write to")
    traffic.add_argument("--rate", type=float, help="records/s over all topics (default 20)")
    traffic.add_argument("--duration", type=float, help="stop after this many seconds (default: until SIGTERM)")
    traffic.set_defaults(func=_demo_traffic)
