"""The configuration reference page, generated from ``mirrorflow.config.keys``.

The page is checked in (it reads on a code host as well as on the site) and must equal what this module
renders: the site's build fails when it does not (``mkdocs_hooks``), and so does a unit test. Rewrite it with
``python -m mirrorflow_dev.docs.reference`` after changing a key.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from mirrorflow.config import keys

REPO_ROOT = Path(__file__).resolve().parents[3]
PAGE = REPO_ROOT / "docs" / "configuration" / "reference.md"
KAFKA_MIRROR = "https://github.com/apache/kafka/blob/trunk/connect/mirror/src/main/java/org/apache/kafka/connect/mirror"

_INTRO = f"""\
---
hide:
  - navigation
---
<!-- Generated from include/mirrorflow/config/keys.py by `python -m mirrorflow_dev.docs.reference`: do not edit. -->
# Configuration reference

Every key mirrorflow reads from `mm2.properties`, with its type, default and allowed values. `mirrorflow config
validate` checks a file against exactly this table and names the file, line and key of anything outside it.

Flow-level keys are written as `<source>-><target>.<key>` for one flow, or as `<key>` alone for every flow (the
flow's own line wins), as in MirrorMaker 2. Defaults of MirrorMaker 2's keys are MirrorMaker 2's own: see
[`MirrorSourceConfig`]({KAFKA_MIRROR}/MirrorSourceConfig.java),
[`MirrorCheckpointConfig`]({KAFKA_MIRROR}/MirrorCheckpointConfig.java),
[`MirrorHeartbeatConfig`]({KAFKA_MIRROR}/MirrorHeartbeatConfig.java) and
[`MirrorConnectorConfig`]({KAFKA_MIRROR}/MirrorConnectorConfig.java).
How mirrorflow treats MirrorMaker 2's keys where it differs is in
[MirrorMaker 2 compatibility](mm2-compatibility.md).

Durations (`duration`) are written `30s`, `5m`, `2h` or in seconds; schedules (`schedule`) are a duration, a cron
expression, an Airflow preset such as `@hourly`, or `none`.
"""


def _cell(text: str) -> str:
    """Markdown table cell text: pipes escaped, never empty."""
    return text.replace("|", "\\|").replace("\n", " ") or "&nbsp;"


def _code(value: str | None) -> str:
    if value is None:
        return "(unset)"
    if value == "":
        return "(empty)"
    return f"`{value}`"


def _allowed(spec: keys.KeySpec) -> str:
    if spec.choices:
        return ", ".join(f"`{c}`" for c in spec.choices)
    if spec.minimum is not None and spec.maximum is not None:
        text = f"{spec.minimum:,} to {spec.maximum:,}"
        return f"{text}, not 0" if spec.zero else text
    return {"bool": "`true`, `false`", "list": "comma-separated"}.get(spec.type, "")


def _description(spec: keys.KeySpec) -> str:
    """The key's description, then its type and allowed values in italics."""
    allowed = _allowed(spec)
    kind = f"*{spec.type}" + (f": {allowed}" if allowed else "") + "*"
    text = spec.doc.rstrip(".")
    return f"{text[:1].upper()}{text[1:]}. {kind}" if text else kind


def _table(specs: Iterable[keys.KeySpec], *, default: bool = True) -> list[str]:
    head = ["| Key | Default | Description |", "|---|---|---|"] if default else ["| Key | Description |", "|---|---|"]
    rows = []
    for spec in specs:
        cells = [f"`{spec.name}`", *([_code(spec.default)] if default else []), _description(spec)]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return head + rows


def _section(title: str, text: str, body: list[str]) -> list[str]:
    """A section of the page: its heading, the paragraph that says what it holds (if any), its table."""
    return [f"## {title}", "", *([text, ""] if text else []), *body, ""]


def render() -> str:
    """The whole page, as it must be checked in."""
    own = [s for s in keys.CONNECTOR_KEYS.values() if s.name.startswith(keys.MIRRORFLOW_PREFIX)]
    mm2 = [s for s in keys.CONNECTOR_KEYS.values() if not s.name.startswith(keys.MIRRORFLOW_PREFIX)]
    families = (
        f"`{keys.FAMILIES}` names a flow's families; each family then sets these attributes as "
        f"`{keys.FAMILY_PREFIX}<name>.<attribute>`. The catch-all family `{keys.DEFAULT_FAMILY}` holds every topic "
        "no other family claims and may set only " + ", ".join(f"`{a}`" for a in keys.DEFAULT_FAMILY_ATTRIBUTES) + "."
    )
    client = (
        "Client settings (`<alias>.<setting>`, `<alias>.consumer.<setting>`, `<alias>.producer.<setting>`, "
        "`<alias>.admin.<setting>`) go to the Kafka clients. These are checked at `config validate` time "
        "against the range the client library accepts, so a value it would refuse fails on the line that sets "
        "it, not in the middle of a run. Any other `*.ms` setting must be a non-negative integer of at most "
        f"{keys.INT32_MAX:,}."
    )
    workers = (
        "mirrorflow runs no Connect workers, so keys that start with these prefixes are accepted and ignored "
        "without a warning:"
    )
    old_names = [
        "| Old key | Read as |",
        "|---|---|",
        *(f"| `{o}` | `{n}` |" for o, n in keys.DEPRECATED_ALIASES.items()),
    ]
    lines = [
        _INTRO,
        *_section(
            "mirrorflow's own keys",
            "MirrorMaker 2 ignores keys it does not know, so these can sit in a file MirrorMaker 2 also reads.",
            _table(own),
        ),
        *_section("Topic families", families, _table(keys.FAMILY_ATTRIBUTES.values(), default=False)),
        *_section("MirrorMaker 2's flow keys", "Read with MirrorMaker 2's meaning and default.", _table(mm2)),
        *_section("Top-level keys", "", _table(keys.TOP_LEVEL_KEYS.values())),
        *_section("Client settings checked before a run", client, _table(keys.CLIENT_KEYS.values(), default=False)),
        *_section("Old names still accepted", "", old_names),
        *_section(
            "Keys of MirrorMaker 2's Connect workers",
            workers,
            [", ".join(f"`{p}`" for p in keys.WORKER_PREFIXES) + "."],
        ),
    ]
    return "\n".join(lines)


def stale(docs_dir: Path = PAGE.parents[1]) -> str | None:
    """Why the page in ``docs_dir`` differs from the rendered one, or None when they are equal."""
    page = docs_dir / PAGE.relative_to(PAGE.parents[1])
    shown = f"docs/{page.relative_to(docs_dir)}"
    if not page.exists():
        return f"{shown} is missing: write it with `python -m mirrorflow_dev.docs.reference`"
    if page.read_text(encoding="utf-8") != render():
        return (
            f"{shown} is out of date with include/mirrorflow/config/keys.py: "
            "rewrite it with `python -m mirrorflow_dev.docs.reference`"
        )
    return None


def main() -> int:
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
