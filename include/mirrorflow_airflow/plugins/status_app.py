"""The "Replication" page of the Airflow UI and its Prometheus endpoint: a FastAPI app the API server mounts.

Why inside Airflow: the operator already has it open and logged in, so the page needs no server, port or
login of its own. Airflow does not authenticate plugin apps (a mounted app inherits none of the core
API's dependencies), so every route here depends on Airflow's own ``get_user``: the JWT of the UI's
``_token`` cookie or an ``Authorization: Bearer`` token from ``POST /auth/token``, checked by the
deployment's auth manager. The HTML page sends an anonymous visitor to the login page; the JSON and the
metrics answer 401.

Routes (under ``/mirrorflow``): ``/`` the page (static HTML and script, refreshing itself), ``/api/status``
the figures it shows (the status model of ``mirrorflow.status`` plus the DAG ids to link and
each flow's lag threshold), ``/metrics`` the same figures in Prometheus text format.

A whole-cluster flow has thousands of partitions: ``/api/status`` also summarises them per topic (``topics``),
and takes a topic filter and page parameters for both lists (see :func:`status_body`); without parameters it
answers every partition, as it always did. The page asks for one page of each and lets the user page or filter.

The figures come from the clusters, through the same library call as ``mirrorflow status``; they are
computed at most once per :data:`CACHE_SECONDS` whoever asks (viewers and a Prometheus scraper share
one computation), in a worker thread, never on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)

URL_PREFIX = "/mirrorflow"

#: A status is reused for this long (seconds): a page refreshing every 15 s and a scraper every 15 s, or
#: ten people with the page open, cost one computation, not one each.
CACHE_SECONDS = 10.0

#: The page refreshes itself this often (seconds); shown on the page.
REFRESH_SECONDS = 15

PAGE = Path(__file__).with_name("status_page.html")


@dataclass
class Snapshot:
    """One computation: when, the statuses, what the page needs besides them, and each ranked for paging.

    ``pages`` (one :class:`~mirrorflow.status.StatusPages` per flow) ranks the partitions and topics once, so a
    request pays for the rows it returns, not for sorting 10,000 again; the metrics text is rendered once, on
    the first scrape, and shared by the next ones.
    """

    computed_at: float
    statuses: list[Any]
    extras: list[dict[str, Any]]
    pages: list[Any]
    _metrics: str | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def metrics(self) -> str:
        """The Prometheus text of these statuses (rendered on first use)."""
        from mirrorflow.metrics import render

        with self._lock:
            if self._metrics is None:
                self._metrics = render(self.statuses)
            return self._metrics


class StatusCache:
    """The newest computed statuses, recomputed by one caller at a time once older than ``ttl``."""

    def __init__(self, ttl: float = CACHE_SECONDS) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._value: Snapshot | None = None

    def get(self) -> Snapshot:
        """The current snapshot; the caller waits for a running computation."""
        with self._lock:
            if self._value is None or time.monotonic() - self._value.computed_at > self.ttl:
                started = time.monotonic()  # the figures' age counts from when their measuring began
                self._value = snapshot(started, *compute())
            return self._value

    def clear(self) -> None:
        with self._lock:
            self._value = None


def snapshot(started: float, statuses: list[Any], extras: list[dict[str, Any]]) -> Snapshot:
    """A :class:`Snapshot` of statuses whose computation began at ``started`` (their rows ranked now)."""
    from mirrorflow.status import StatusPages

    return Snapshot(started, statuses, extras, [StatusPages(st) for st in statuses])


def compute() -> tuple[list[Any], list[dict[str, Any]]]:
    """Every enabled flow's status, in parallel, with what the page links to (DAG ids) and colours by."""
    from mirrorflow.status import flow_status
    from mirrorflow_airflow.hooks.config import MirrorflowHook

    flows = MirrorflowHook().load().enabled_flows()
    with ThreadPoolExecutor(max(1, min(8, len(flows))), thread_name_prefix="mirrorflow-status") as pool:
        statuses = list(pool.map(flow_status, flows))
    return statuses, [page_extras(flow) for flow in flows]


def page_extras(flow: Any) -> dict[str, Any]:
    """What the page needs besides the figures: the flow's DAG ids and the lag over which a row turns red."""
    return {
        "flow": flow.name,
        "dags": {
            "mirror": {f.name: flow.dag_id("mirror", f.name) for f in flow.families},
            "checkpoints": flow.dag_id("checkpoints"),
            "heartbeats": flow.dag_id("heartbeats"),
            "failover": flow.dag_id("failover"),
            "failback": flow.dag_id("failback"),
            "verify": flow.dag_id("verify"),
        },
        "lag_threshold_seconds": lag_thresholds(flow),
    }


def lag_thresholds(flow: Any) -> dict[str, float]:
    """Per family, the lag (seconds) over which a partition is shown in red: the lag alert's threshold when one is
    set (``mirrorflow.alerts.lag.max.seconds``), else the heartbeats' staleness budget
    (``mirrorflow.heartbeats.max.age``): a copy further behind than the heartbeats may be is worth a look."""
    from mirrorflow import heartbeats, lag_alerts

    own = lag_alerts.thresholds(flow)
    fallback = heartbeats.threshold_seconds(flow)
    return {f.name: float(own.get(f.name, fallback)) for f in flow.families}


CACHE = StatusCache()


def create_app() -> FastAPI:
    """The FastAPI app; built on the first request (see :class:`LazyApp`)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response

    app = FastAPI(
        title="mirrorflow status",
        description="How far behind each flow's copy is, in records and seconds; the same figures as Prometheus metrics.",
        dependencies=[Depends(get_user)],  # every route: Airflow's own authentication
    )

    @app.exception_handler(HTTPException)
    async def login_first(request: Request, exc: HTTPException) -> Response:
        """A person opening the page without a session goes to Airflow's login and comes back; machines get 401."""
        wants_page = request.url.path.endswith(f"{URL_PREFIX}/") and "text/html" in request.headers.get("accept", "")
        if exc.status_code == 401 and wants_page:
            return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=303)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        """The page: static HTML whose script reads ``api/status`` (relative: works behind a proxy prefix)."""
        html = PAGE.read_text(encoding="utf-8").replace("__REFRESH_SECONDS__", str(REFRESH_SECONDS))
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    @app.get("/api/status")
    def status_json(  # Query() defaults, not Annotated: FastAPI resolves annotations in the module, not here
        flow: str | None = Query(None, description="only this flow (SOURCE->TARGET)"),
        topic: str | None = Query(None, description="only topics whose name contains this (any case)"),
        family: str | None = Query(None, description="only this family's topics"),
        offset: int = Query(0, ge=0, description="first partition row of the page"),
        limit: int | None = Query(None, ge=0, description="partition rows per flow (default: all)"),
        topics_offset: int = Query(0, ge=0, description="first topic row of the page"),
        topics_limit: int | None = Query(None, ge=0, description="topic rows per flow (default: all)"),
    ) -> JSONResponse:
        """Every flow's status (the ``mirrorflow status --json`` figures) with its DAG ids and lag threshold.

        ``partitions`` and ``topics`` are worst first; the parameters filter and page them (every flow alike).
        """
        body = status_body(
            flow=flow,
            topic=topic,
            family=family,
            offset=offset,
            limit=limit,
            topics_offset=topics_offset,
            topics_limit=topics_limit,
        )
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> PlainTextResponse:
        """The same figures in Prometheus text format (``prometheus_client``); see ``include/mirrorflow/metrics.py``."""
        from mirrorflow.metrics import CONTENT_TYPE

        return PlainTextResponse(CACHE.get().metrics(), media_type=CONTENT_TYPE)

    return app


def status_body(flow: str | None = None, **paging: Any) -> dict[str, Any]:
    """What ``/api/status`` answers: the flows' figures, their DAG ids and thresholds, and the figures' age.

    Per flow, ``partitions`` (worst first) and ``topics`` (one row per source topic, worst first) are filtered and
    paged by ``paging`` (``StatusPages.page``'s arguments: ``topic``, ``family``, ``offset``/``limit``,
    ``topics_offset``/``topics_limit``); ``partitions_page``/``topics_page`` say which rows of how many matching,
    ``partitions_total``/``topics_total`` count them all. Without a limit every row is there, as before.
    """
    snap = CACHE.get()
    flows = [
        {**pages.page(**paging), **extra}
        for pages, extra in zip(snap.pages, snap.extras, strict=True)
        if flow is None or extra["flow"] == flow
    ]
    return {
        "flows": flows,
        "age_seconds": round(time.monotonic() - snap.computed_at, 1),
        "refresh_seconds": REFRESH_SECONDS,
    }


class LazyApp:
    """An ASGI app that builds :func:`create_app` on its first request.

    Why: Airflow imports plugins in every process (task runners, the DAG processor), and FastAPI plus
    Airflow's API security module cost about 0.7 s to import there for nothing; only the API server
    ever calls this.
    """

    def __init__(self) -> None:
        self._app: FastAPI | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            self._app = create_app()
        await self._app(scope, receive, send)

    def __repr__(self) -> str:
        return "mirrorflow_airflow.plugins.status_app:app"


app = LazyApp()
