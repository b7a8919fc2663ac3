"""Take the documentation's screenshots of the Airflow UI from a running mirrorflow demo.

Why this exists: screenshots in documentation go stale with every Airflow upgrade and every change to the
mirror DAGs.  Taking them by hand (log in, wait for runs, open the right dialog, crop) is slow and never
quite the same twice; this script does it the same way every time, against the real demo.

How to run it::

    make demo          # clusters + Airflow + traffic; the first mirror runs finish about 2 minutes later
    make screenshots   # installs Debian's chromium if missing, then runs this

or directly, once ``make install`` and ``apt-get install chromium`` are done::

    .venv/bin/python -m mirrorflow_dev.docs.screenshots [--url URL --user USER --password-file FILE] [--out docs/img]

By default it finds the demo's Airflow the way ``make demo`` recorded it (port from the server's PID
record, admin login from the Airflow home's passwords file).  It signs in through the simple auth
manager's login form like a person would (``--login token`` instead gets a token from
``POST /auth/token`` and sets it as the ``_token`` cookie, which is where the login form puts it), waits
(``--wait``, default 10 minutes) until every mirror DAG has a successful run (``--runs``), then writes to
``docs/img/``:

- ``dag-list.png``: the DAG list with the ``mirror__*`` DAGs, their tags, latest and recent runs;
- ``mirror-dag-grid.png``: one mirror DAG's page (``--dag``): the grid of its runs and tasks, and the
  durations of its last runs;
- ``mirror-trigger-form.png``: the Trigger DAG dialog with the DAG's Params form, filled with an example;
- ``failover-trigger-form.png`` and ``failback-trigger-form.png``: the Trigger DAG dialogs of the flow's
  (``--flow``) ``failover__*`` and ``failback__*`` DAGs, their Params forms left at the defaults;
- ``heartbeats-dag-grid.png``: the page of the flow's ``heartbeats__*`` DAG, once it has a successful run
  (``--heartbeats-wait``, default 5 minutes; without one the shot is skipped with a warning).

A DAG the flow does not have (the flow's config turned it off) is skipped with a warning.

The browser is Debian's headless Chromium (``/usr/bin/chromium``), driven by Playwright; Playwright's
own browser download is never used.  The password is never printed.  Nothing is triggered: the dialog
is closed without pressing its Trigger button.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Locator, Page

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_OUT = REPO_ROOT / "docs" / "img"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
DEFAULT_DAG = "mirror__primary__backup__orders"
DAG_PREFIX = "mirror__"
#: The flow (``<src>__<tgt>``) whose failover, failback and heartbeats DAGs are shot.
DEFAULT_FLOW = "primary__backup"
#: Flags without which Chromium hangs on this kind of machine (closed network): no background
#: connections, no component or sync updates, no QUIC, no GPU, no sandbox (we may run as root).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 900}
#: What the Params form is filled with in the Trigger screenshot (an example; the run is never started).
EXAMPLE_PARAMS = {"Keep mirroring for": "10m", "Only these topics": "orders.eu, orders.us"}
#: Room above and below the Trigger dialog when the viewport is grown to fit it.
DIALOG_MARGIN = 64
#: The tallest the viewport is grown to for a shot that does not fit ``VIEWPORT``.
MAX_HEIGHT = 2000
#: Share of the DAG page's width for the grid of runs (Airflow's default, 20 %, fits about three runs).
GRID_SHARE = 0.27
#: The flow's failover and failback DAGs (``<kind>__<flow>``) and the fields of their Params forms, shot
#: with the defaults (nothing filled in).
FLOW_FORMS = {"failover": ("Mode", "Groups", "Dry run", "Force"), "failback": ("Groups", "Dry run", "Force")}
#: How long to wait for the flow's heartbeats DAG's first successful run (one a minute, each about 1 minute).
HEARTBEATS_WAIT = 300
NOT_RUNNING = "Start the demo first with `make demo`; this script then waits for the first mirror runs."


class ScreenshotError(RuntimeError):
    """Something a person has to fix; the message says what."""


@dataclass(frozen=True)
class Target:
    """Where Airflow is and how to log in (``password`` is never printed)."""

    url: str
    user: str
    password: str = ""

    def __repr__(self) -> str:  # keep the password out of tracebacks and debug output
        return f"Target(url={self.url!r}, user={self.user!r}, password='[redacted]')"


# --------------------------------------------------------------------------
# Finding the demo's Airflow
# --------------------------------------------------------------------------


def _demo_target() -> Target:
    """The demo's Airflow URL and admin login, read with the demo's own helpers."""
    from mirrorflow_dev.demo.airflow_env import API_HOST, admin_login
    from mirrorflow_dev.demo.airflow_server import AirflowServer
    from mirrorflow_dev.demo.stack import demo_paths

    home = demo_paths().airflow_home
    port = AirflowServer.recorded_port(home)
    if port is None:
        raise ScreenshotError(f"The mirrorflow demo's Airflow is not running (no live server recorded in {home}).")
    user, password = admin_login(home)
    return Target(f"http://{API_HOST}:{port}", user, password)


def _read_password(path: Path, user: str) -> str:
    """A password file: plain text, or Airflow's simple auth manager JSON ``{"user": "password"}``."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ScreenshotError(f"cannot read the password file {path}: {exc.strerror or exc}") from None
    if text.startswith("{"):
        try:
            passwords = json.loads(text)
        except ValueError:
            raise ScreenshotError(f"{path} looks like JSON but is not valid JSON") from None
        if user not in passwords:
            raise ScreenshotError(f"{path} has no password for user '{user}'")
        return str(passwords[user])
    return text


def resolve_target(args: argparse.Namespace) -> Target:
    """``--url/--user/--password-file`` where given, the running demo's values for the rest."""
    if args.url is not None and args.password_file is not None:
        user = args.user or "admin"
        return Target(args.url.rstrip("/"), user, _read_password(args.password_file, user))
    try:
        demo = _demo_target()
    except ScreenshotError as exc:
        if args.url is None:
            raise ScreenshotError(f"{exc} {NOT_RUNNING}") from None
        raise ScreenshotError(
            f"give --password-file for {args.url} (without it the password of the running demo is used, "
            "and the demo is not running)"
        ) from None
    user = args.user or demo.user
    if args.password_file is not None:
        password = _read_password(args.password_file, user)
    elif user == demo.user:
        password = demo.password
    else:
        raise ScreenshotError(f"no password for user '{user}': give --password-file")
    return Target((args.url or demo.url).rstrip("/"), user, password)


def check_healthy(url: str) -> None:
    """Fail with a clear message when nothing (or not a healthy Airflow) answers at ``url``."""
    try:
        with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=10) as answer:
            health = json.loads(answer.read() or b"{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ScreenshotError(f"No Airflow answers at {url} ({reason}). {NOT_RUNNING}") from None
    unhealthy = [k for k, v in health.items() if isinstance(v, dict) and v.get("status") != "healthy"]
    if unhealthy:
        print(f"warning: Airflow at {url} reports unhealthy components: {', '.join(unhealthy)}", flush=True)


# --------------------------------------------------------------------------
# Browser
# --------------------------------------------------------------------------


@contextmanager
def browser_context(chromium: str) -> Iterator[BrowserContext]:
    """A fresh headless Chromium (Debian's binary, empty profile) and a light-mode context of ``VIEWPORT``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ScreenshotError(
            "Playwright is not installed in this Python: `make install` installs it (with the dev extra)."
        ) from None
    if not Path(chromium).exists():
        raise ScreenshotError(
            f"{chromium} not found: install Debian's Chromium with `apt-get install chromium` "
            "(`make screenshots` does it)."
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(
                viewport=VIEWPORT, device_scale_factor=1, color_scheme="light", locale="en-US", timezone_id="UTC"
            )
            context.set_default_timeout(30_000)
            yield context
        finally:
            browser.close()


def login_with_form(page: Page, target: Target) -> None:
    """Sign in through the simple auth manager's form, as a person does; it stores the JWT in the ``_token`` cookie."""
    page.goto(f"{target.url}/auth/login?next={urllib.parse.quote('/dags')}", wait_until="networkidle")
    page.locator("input[name=username]").fill(target.user)
    page.locator("input[name=password]").fill(target.password)
    page.get_by_role("button", name="Sign in").click()
    # "401 Unauthorized / Invalid credentials"; the other alert on that page is the simple auth manager's banner.
    alerts = page.locator(".chakra-alert__root").filter(has_not_text="Simple auth manager enabled")
    error = alerts.locator(".chakra-alert__description")
    deadline = time.monotonic() + 20
    while "/auth/login" in page.url:
        if error.count() and error.first.is_visible():
            why = " ".join(error.first.inner_text().split())
            raise ScreenshotError(f"login as '{target.user}' at {target.url} failed: {why}")
        if time.monotonic() >= deadline:
            raise ScreenshotError(
                f"login as '{target.user}' at {target.url} failed: still on the login page after 20 s"
            )
        page.wait_for_timeout(250)


def login_with_token(context: BrowserContext, target: Target) -> None:
    """``POST /auth/token`` and put the JWT where the UI's login form puts it: cookie ``_token``, path ``/``."""
    answer = context.request.post(
        f"{target.url}/auth/token", data={"username": target.user, "password": target.password}
    )
    if answer.status not in (200, 201):
        raise ScreenshotError(f"login as '{target.user}' at {target.url}/auth/token failed: HTTP {answer.status}")
    token = answer.json()["access_token"]
    context.add_cookies([{"name": "_token", "value": token, "url": f"{target.url}/"}])


def api(page: Page, url: str, path: str) -> Any:
    """GET the REST API with the browser's session cookie; the parsed JSON."""
    answer = page.request.get(url + path)
    if not answer.ok:
        raise ScreenshotError(f"GET {path}: HTTP {answer.status}")
    return answer.json()


def dag_ids(page: Page, url: str, pattern: str) -> list[str]:
    """The ids of the DAGs the API's ``dag_id_pattern`` matches (``pattern`` anywhere in the id)."""
    body = api(page, url, f"/api/v2/dags?limit=100&dag_id_pattern={urllib.parse.quote(pattern)}")
    return sorted(d["dag_id"] for d in body.get("dags", []))


def mirror_dags(page: Page, url: str) -> list[str]:
    return [d for d in dag_ids(page, url, DAG_PREFIX) if d.startswith(DAG_PREFIX)]


def successful_runs(page: Page, url: str, dag_id: str) -> int:
    body = api(page, url, f"/api/v2/dags/{urllib.parse.quote(dag_id, safe='')}/dagRuns?state=success&limit=1")
    return int(body.get("total_entries", 0))


def wait_for_runs(
    page: Page, url: str, dags: list[str], wanted: int, timeout: float, *, what: str = "each mirror DAG"
) -> bool:
    """Wait until every DAG has ``wanted`` successful runs (the screenshots show them); warn on timeout.

    True when they all have them, False when the wait timed out.
    """
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        counts = {d: successful_runs(page, url, d) for d in dags}
        short = [d for d, n in counts.items() if n < wanted]
        if not short:
            return True
        if time.monotonic() >= deadline:
            print(f"warning: still fewer than {wanted} successful runs for {', '.join(short)}; going on", flush=True)
            return False
        line = ", ".join(f"{d.removeprefix(DAG_PREFIX)} {counts[d]}" for d in dags)
        if line != said:
            print(f"waiting for {wanted} successful run(s) of {what} (now: {line})...", flush=True)
            said = line
        time.sleep(5)


# --------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------


def settle(page: Page) -> None:
    """Wait until the page looks finished: no pending requests, no loading bars or skeletons, fonts ready."""
    page.wait_for_load_state("networkidle")
    # Not .chakra-spinner: a running DAG run's state badge spins for as long as the run lasts.
    for selector in ('[role=progressbar][aria-label="loading..."]', ".chakra-skeleton"):
        if page.locator(selector).count():
            page.locator(selector).first.wait_for(state="hidden", timeout=30_000)
    page.evaluate("document.fonts.ready.then(() => true)")
    page.wait_for_timeout(750)  # the last re-render after the data arrived (charts animate in)


def bottom_of(locator: Locator) -> float:
    box = locator.bounding_box()
    if box is None:
        raise ScreenshotError(f"{locator} is not visible")
    return box["y"] + box["height"]


def crop_top(page: Page, height: float) -> dict[str, float]:
    """The top ``height`` pixels of the viewport, moved down past a navigation item the edge would cut in two."""
    size = page.viewport_size or VIEWPORT
    y = min(float(size["height"]), height)
    for item in page.locator("[data-testid=nav-sidebar] a, [data-testid=nav-sidebar] button").all():
        box = item.bounding_box()
        if box is not None and box["y"] < y < box["y"] + box["height"]:
            y = min(float(size["height"]), box["y"] + box["height"] + 4)
    return {"x": 0, "y": 0, "width": size["width"], "height": y}


@contextmanager
def viewport_height(page: Page, height: float) -> Iterator[None]:
    """The viewport grown to ``height`` pixels (never shrunk, at most ``MAX_HEIGHT``), ``VIEWPORT`` again after.

    For what does not fit ``VIEWPORT``: a DAG list of more than a few DAGs, a Trigger dialog with many params.
    """
    height = min(int(height), MAX_HEIGHT)
    if height > VIEWPORT["height"]:
        page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
        settle(page)
    try:
        yield
    finally:
        page.set_viewport_size(VIEWPORT)


#: The bottom edge of the bordered box (a chart's card) around the element it is called on; what starts
#: below that edge in the same panel is hidden, so that no sliver of the next card shows above the crop.
_CARD_BOTTOM_JS = """
(el) => {
  let bottom = el.getBoundingClientRect().bottom;
  for (let node = el; node && node !== document.body; node = node.parentElement) {
    if (parseFloat(getComputedStyle(node).borderBottomWidth) > 0) {
      bottom = node.getBoundingClientRect().bottom;
      break;
    }
  }
  const panel = el.closest("#details-panel") || document.body;
  for (const other of panel.querySelectorAll("*")) {
    if (other.getBoundingClientRect().top > bottom) other.style.visibility = "hidden";
  }
  return bottom;
}
"""


def shoot_dag_list(page: Page, url: str, dags: list[str], out: Path) -> Path:
    """The DAG list (card view: tags, schedule, latest and next run), cropped below the last card."""
    page.goto(f"{url}/dags", wait_until="networkidle")
    for dag_id in dags:
        page.get_by_role("link", name=dag_id, exact=True).first.wait_for()
    settle(page)
    last_card = page.locator("[data-testid=dag-card]").last
    path = out / "dag-list.png"
    with viewport_height(page, bottom_of(last_card) + 16):  # every card, not only those of the first screen
        page.screenshot(path=path, animations="disabled", clip=crop_top(page, int(bottom_of(last_card)) + 16))
    return path


def shoot_replication_page(page: Page, url: str, out: Path) -> Path:
    """The Replication page inside the UI (its navigation entry), once its figures and run charts are drawn."""
    page.goto(f"{url}/plugin/replication", wait_until="networkidle")
    frame = page.frame_locator("iframe")
    frame.locator("body[data-loaded] table.partitions tbody tr").first.wait_for()
    settle(page)
    inner = page.evaluate("() => document.querySelector('iframe').contentDocument.body.scrollHeight")
    path = out / "replication-page.png"
    with viewport_height(page, inner + 40):  # the whole page: every family and partition of the demo
        page.screenshot(path=path, animations="disabled")
    return path


def widen_grid(page: Page, share: float) -> None:
    """Drag the divider between the grid panel and the details panel so the grid takes ``share`` of the width.

    The grid panel starts at a fifth of the width, where a handful of runs already overflows it.
    """
    handle = page.locator("[data-panel-resize-handle-id]").first
    grid = page.locator("#main-panel").bounding_box()
    details = page.locator("#details-panel").bounding_box()
    box = handle.bounding_box()
    if grid is None or details is None or box is None:
        return  # another layout: leave it as it is
    # Not at mid-height: the "collapse details panel" button sits there, and a click on it hides the details.
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 4
    target = grid["x"] + share * (details["x"] + details["width"] - grid["x"])
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(target, y, steps=10)
    page.mouse.up()


def shoot_dag_grid(
    page: Page, url: str, dag_id: str, out: Path, *, name: str = "mirror-dag-grid.png", task: str = "replicate"
) -> Path:
    """A DAG's page: the grid of its runs and task states (``task`` is one of them) on the left, the overview
    on the right."""
    page.goto(f"{url}/dags/{urllib.parse.quote(dag_id, safe='')}", wait_until="networkidle")
    page.get_by_text(task, exact=True).first.wait_for()
    settle(page)
    widen_grid(page, GRID_SHARE)
    page.mouse.move(0, VIEWPORT["height"] - 1)  # no hover effects on the divider
    settle(page)
    # Down to the run-duration chart; what follows (the asset events) wraps below it at this width.
    chart_title = page.get_by_text(re.compile(r"^Last \d+ Dag Runs?$")).first
    bottom = chart_title.evaluate(_CARD_BOTTOM_JS) if chart_title.count() else VIEWPORT["height"]
    path = out / name
    page.screenshot(path=path, animations="disabled", clip=crop_top(page, bottom + 16))
    return path


def shoot_trigger_form(
    page: Page,
    url: str,
    dag_id: str,
    out: Path,
    *,
    name: str = "mirror-trigger-form.png",
    fill: dict[str, str] | None = None,
    fields: tuple[str, ...] = (),
) -> Path:
    """The Trigger DAG dialog with the Params form, its ``fill`` fields filled (default: ``EXAMPLE_PARAMS``),
    the ``fields`` labels present; closed again, never submitted."""
    fill = EXAMPLE_PARAMS if fill is None else fill
    page.goto(f"{url}/dags/{urllib.parse.quote(dag_id, safe='')}", wait_until="networkidle")
    settle(page)
    page.get_by_role("button", name="Trigger Dag", exact=True).first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    # The form's <label>s are not tied to their <input>s (for= names another id): find the field group.
    for label in fields:
        dialog.get_by_role("group").filter(has=page.locator("label", has_text=label)).first.wait_for()
    for label, value in fill.items():
        field = dialog.get_by_role("group").filter(has=page.locator("label", has_text=label))
        field.locator("input").fill(value)
    dialog.get_by_role("heading").first.click()  # move the focus out of the last field, so it validates
    settle(page)
    path = out / name
    # A dialog taller than the viewport (four params with descriptions) would be cut off at its bottom.
    with viewport_height(page, dialog.evaluate("el => el.offsetHeight") + 2 * DIALOG_MARGIN):
        dialog.screenshot(path=path, animations="disabled")
        page.keyboard.press("Escape")
    return path


def shoot_flow(page: Page, url: str, flow: str, out: Path, heartbeats_wait: float) -> list[Path]:
    """The flow's failover and failback Trigger dialogs (defaults), and its heartbeats DAG's page once it ran.

    A DAG the flow lacks, or a heartbeats DAG without a successful run after ``heartbeats_wait`` seconds,
    is skipped with a warning.
    """
    present = set(dag_ids(page, url, flow))
    paths = []
    for kind, fields in FLOW_FORMS.items():
        dag_id = f"{kind}__{flow}"
        if dag_id not in present:
            print(f"warning: no DAG {dag_id}; skipping {kind}-trigger-form.png", flush=True)
            continue
        paths.append(
            shoot_trigger_form(page, url, dag_id, out, name=f"{kind}-trigger-form.png", fill={}, fields=fields)
        )
    heartbeats = f"heartbeats__{flow}"
    if heartbeats not in present:
        print(f"warning: no DAG {heartbeats}; skipping heartbeats-dag-grid.png", flush=True)
    elif wait_for_runs(page, url, [heartbeats], 1, heartbeats_wait, what=heartbeats):
        paths.append(shoot_dag_grid(page, url, heartbeats, out, name="heartbeats-dag-grid.png", task="emit_heartbeats"))
    else:
        print("warning: skipping heartbeats-dag-grid.png (no successful heartbeats run yet)", flush=True)
    return paths


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="Airflow's base URL (default: the running `make demo`'s)")
    parser.add_argument("--user", help="user to log in as (default: the demo's admin)")
    parser.add_argument(
        "--password-file",
        type=Path,
        help="file with the password: plain text, or the simple auth manager's JSON (default: the demo's)",
    )
    parser.add_argument("--login", choices=("form", "token"), default="form", help="how to sign in (default: form)")
    parser.add_argument(
        "--dag", default=DEFAULT_DAG, help=f"DAG for the grid and trigger shots (default: {DEFAULT_DAG})"
    )
    parser.add_argument(
        "--flow",
        default=DEFAULT_FLOW,
        help=f"flow (<src>__<tgt>) of the failover, failback and heartbeats shots (default: {DEFAULT_FLOW})",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: docs/img)")
    parser.add_argument("--chromium", default=DEFAULT_CHROMIUM, help=f"Chromium binary (default: {DEFAULT_CHROMIUM})")
    parser.add_argument("--runs", type=int, default=1, help="successful runs per mirror DAG to wait for (default: 1)")
    parser.add_argument("--wait", type=float, default=600, help="seconds to wait for them (default: 600)")
    parser.add_argument(
        "--heartbeats-wait",
        type=float,
        default=HEARTBEATS_WAIT,
        help=f"seconds to wait for a successful run of the heartbeats DAG (default: {HEARTBEATS_WAIT})",
    )
    return parser.parse_args(argv)


def take_screenshots(target: Target, args: argparse.Namespace) -> list[Path]:
    args.out.mkdir(parents=True, exist_ok=True)
    with browser_context(args.chromium) as context:
        from playwright.sync_api import Error as PlaywrightError

        page = context.new_page()
        try:
            if args.login == "form":
                login_with_form(page, target)
            else:
                login_with_token(context, target)
            dags = mirror_dags(page, target.url)
            if not dags:
                raise ScreenshotError(f"Airflow at {target.url} has no {DAG_PREFIX}* DAGs. {NOT_RUNNING}")
            if args.dag not in dags:
                raise ScreenshotError(f"DAG {args.dag} not found; the mirror DAGs are: {', '.join(dags)}")
            wait_for_runs(page, target.url, dags, args.runs, args.wait)
            return [
                shoot_dag_list(page, target.url, dags, args.out),
                shoot_dag_grid(page, target.url, args.dag, args.out),
                shoot_trigger_form(page, target.url, args.dag, args.out),
                *shoot_flow(page, target.url, args.flow, args.out, args.heartbeats_wait),
                shoot_replication_page(page, target.url, args.out),
            ]
        except PlaywrightError as exc:  # a page did not look as expected: keep what the browser saw
            seen = Path(tempfile.gettempdir()) / "mirrorflow-screenshot-failed.png"
            with suppress(PlaywrightError):
                page.screenshot(path=seen)
            lines = [ln.strip() for ln in str(exc).strip().splitlines()]
            lines = [ln.replace(target.password, "[redacted]") if target.password else ln for ln in lines]
            what = "; ".join([*lines[:1], *[ln.lstrip("- ") for ln in lines if ln.startswith("- waiting for")][:1]])
            raise ScreenshotError(f"{what or type(exc).__name__} (page {page.url}; it showed: {seen})") from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        target = resolve_target(args)
        check_healthy(target.url)
        print(f"taking screenshots of {target.url} as '{target.user}' (login: {args.login})...", flush=True)
        t0 = time.monotonic()
        paths = take_screenshots(target, args)
    except ScreenshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
        print(f"  wrote {shown} ({path.stat().st_size // 1024} KiB)")
    print(f"done in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
