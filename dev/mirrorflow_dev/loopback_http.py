"""An HTTP server on a free loopback port, served from a thread for the length of a ``with`` block.

The stand-ins of the tests (webhook receivers, a token endpoint, Airflow's health answer) and the documentation's
screenshot server all need the same thing: a handler answering on 127.0.0.1 while the caller works, and nothing
left listening afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

HOST = "127.0.0.1"


@contextmanager
def serving(handler: Callable[..., Any]) -> Iterator[str]:
    """Serve ``handler`` (a request handler class, or a factory of one) on a free port; yields the base URL
    (``http://127.0.0.1:PORT``, no trailing slash). The server is shut down and its socket closed on exit."""
    server = ThreadingHTTPServer((HOST, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["serving"]
