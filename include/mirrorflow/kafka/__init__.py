"""Kafka primitives every layer above uses: client construction from Java properties (``clients``), call counting
(``calls``), offset lookups (``offsets``), record timestamps (``timestamps``) and errors in words (``errors``).

Below replication, checkpoints, status and the rest; above only the configuration.
"""
