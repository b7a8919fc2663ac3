"""The Spark application spark-submit runs: ``mirror_family.py`` in this folder (:data:`MIRROR_APP`).

A folder of its own because spark-submit runs the file as a script, and Python then puts the file's folder first
on ``sys.path``: next to the library's modules, ``copy.py`` would shadow the standard library's ``copy``.
"""

from __future__ import annotations

from pathlib import Path

#: The app's file, inside the installed package (spark-submit uploads it in cluster deploy mode).
MIRROR_APP = Path(__file__).resolve().with_name("mirror_family.py")

__all__ = ["MIRROR_APP"]
