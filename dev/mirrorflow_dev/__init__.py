"""mirrorflow's development tooling: the embedded Kafka clusters, the standalone Spark cluster, the demo stack.

Not part of the product: the wheel does not ship it and Spark executors never receive it. It lives in this
checkout, installed (editable) by ``make install`` as the distribution ``mirrorflow-dev``, and adds the ``dev`` and
``demo`` commands to the ``mirrorflow`` CLI through the ``mirrorflow.commands`` entry point group.

From a checkout, state stays in the checkout: ``MIRRORFLOW_HOME`` defaults to ``<checkout>/.mirrorflow`` for every
process this package starts (the product's own default is outside any source tree).
"""

from __future__ import annotations

import os
from pathlib import Path

from mirrorflow.config.location import HOME_ENV_VAR

#: The checkout this package is imported from (dev/mirrorflow_dev/__init__.py is two levels below it).
CHECKOUT = Path(__file__).resolve().parents[2]

#: The example configuration the demo and the tests use.
EXAMPLE_CONFIG = CHECKOUT / "include" / "config" / "mm2.properties"

os.environ.setdefault(HOME_ENV_VAR, str(CHECKOUT / ".mirrorflow"))

__all__ = ["CHECKOUT", "EXAMPLE_CONFIG"]
