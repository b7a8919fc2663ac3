"""The replication engine: plan, copy (inside Spark tasks), progress, offset syncs, run report."""
