"""Failover: move consumer groups to the target cluster in one audited, resumable run (and back)."""
