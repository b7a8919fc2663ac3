"""Screenshots of the built documentation site, taken in Debian's headless Chromium.

``make site-screenshots`` builds the site (``make docs``), serves ``build/site`` on a free loopback port and writes
``docs/img/site-home.png`` (the landing page) and ``docs/img/site-reference.png`` (the generated configuration
reference), the pictures the documentation's own page shows. The browser is the one ``screenshots`` drives.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
from dataclasses import dataclass
from pathlib import Path

from mirrorflow_dev.docs.screenshots import REPO_ROOT, ScreenshotError, browser_context
from mirrorflow_dev.loopback_http import serving

SITE = REPO_ROOT / "build" / "site"
OUT = REPO_ROOT / "docs" / "img"


@dataclass(frozen=True)
class Shot:
    """One page of the site and the file its picture goes to; ``ready`` is text the page must show first."""

    path: str
    file: str
    ready: str


SHOTS = (
    Shot("", "site-home.png", "Replicate Kafka clusters"),
    Shot("configuration/reference/", "site-reference.png", "mirrorflow.delivery"),
)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def take(site: Path, out: Path, chromium: str) -> list[Path]:
    """Every shot of ``SHOTS`` from ``site`` into ``out``; the written files."""
    if not (site / "index.html").exists():
        raise ScreenshotError(f"no built site in {site}: run `make docs` first")
    written = []
    with serving(functools.partial(_QuietHandler, directory=str(site))) as base, browser_context(chromium) as context:
        page = context.new_page()
        for shot in SHOTS:
            page.goto(f"{base}/{shot.path}", wait_until="networkidle")
            page.get_by_text(shot.ready).first.wait_for()
            target = out / shot.file
            page.screenshot(path=str(target))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=SITE, help="the built site (default: build/site)")
    parser.add_argument("--out", type=Path, default=OUT, help="where the pictures go (default: docs/img)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    try:
        for path in take(args.site, args.out, args.chromium):
            print(f"wrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    except ScreenshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
