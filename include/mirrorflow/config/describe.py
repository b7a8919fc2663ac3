"""A redacted, printable description of a resolved configuration.

``mirrorflow config show``, and later the DAG docs and the status page, all describe flows the same
way; building the description once here keeps them consistent and keeps secrets out of every one
of them (values go through :func:`mirrorflow.redact.redact_value`).
"""

from __future__ import annotations

from typing import Any

from ..redact import redact_value
from .model import FlowConfig, MirrorConfig, Setting


def _setting(key: str, setting: Setting) -> dict[str, str | None]:
    return {"value": redact_value(key, setting.value), "origin": setting.origin.describe()}


def describe_policy(flow: FlowConfig) -> str:
    cls = type(flow.policy).__name__
    example = flow.policy.format_remote_topic(flow.source, "orders")
    return f"{cls}: source topic 'orders' becomes '{example}' on {flow.target}"


def describe_flow(flow: FlowConfig) -> dict[str, Any]:
    """Everything about one flow an operator needs to see, secrets redacted."""
    return {
        "flow": flow.name,
        "source": flow.source,
        "target": flow.target,
        "enabled": flow.enabled,
        "delivery": flow.delivery,
        "policy": describe_policy(flow),
        "heartbeats": flow.emits_heartbeats,
        "families": [
            {
                "name": fam.name,
                "topics": str(fam.topics) if fam.topics is not None else None,
                "schedule": fam.schedule.text,
                "origin": fam.origin.describe(),
            }
            for fam in flow.families
        ],
        "internal_topics": flow.internal_topics(),
        "settings": {k: _setting(k, s) for k, s in sorted(flow.settings.items())},
        "clients": {
            f"{side} {role}": {k: _setting(k, s) for k, s in sorted(settings.items())}
            for (side, role), settings in flow.clients.items()
        },
    }


def describe_config(config: MirrorConfig, flow: str | None = None) -> dict[str, Any]:
    """The whole configuration (or one flow ``SRC->TGT``) as plain data."""
    flows = config.enabled_flows() if flow is None else [config.flow(*flow.split("->", 1))]
    return {
        "file": config.path,
        "clusters": {
            alias: {k: _setting(f"{alias}.{k}", s) for k, s in sorted(cluster.properties.items())}
            for alias, cluster in config.clusters.items()
        },
        "flows": [describe_flow(f) for f in flows],
        "heartbeat_only_pairs": _heartbeat_only_pairs(config),
        "warnings": config.warnings,
    }


def _heartbeat_only_pairs(config: MirrorConfig) -> list[str]:
    """Pairs MM2 would run only for heartbeats (read from the settings: building every pair is quadratic)."""
    names = []
    for pair in config.flows:
        flow = config.flows.same_settings(pair)
        if not flow.enabled and flow.emits_heartbeats:
            names.append(f"{pair[0]}->{pair[1]}")
    return names


def render_text(description: dict[str, Any]) -> str:
    """Human-readable form of :func:`describe_config`."""
    out: list[str] = [f"Configuration {description['file']}", "", "Clusters"]
    for alias, props in description["clusters"].items():
        out.append(f"  {alias}")
        out.extend(_rows(props, indent=4))
    for flow in description["flows"]:
        state = "enabled" if flow["enabled"] else "not enabled"
        out += [
            "",
            f"Flow {flow['flow']} ({state})",
            f"  delivery:   {flow['delivery']}",
            f"  policy:     {flow['policy']}",
            f"  heartbeats: {'emitted' if flow['heartbeats'] else 'off'}",
            "  families:",
        ]
        for fam in flow["families"]:
            topics = fam["topics"] if fam["topics"] is not None else "(every replicated topic no other family claims)"
            out.append(f"    {fam['name']:<12} schedule {fam['schedule']:<10} topics {topics}")
        out.append("  internal topics:")
        out.extend(f"    {name}: {where}" for name, where in flow["internal_topics"].items())
        out.append("  settings:")
        out.extend(_rows(flow["settings"], indent=4))
        for client, props in flow["clients"].items():
            out.append(f"  {client} client:")
            out.extend(_rows(props, indent=4))
    if description["heartbeat_only_pairs"]:
        out += [
            "",
            "Pairs without replication where MM2 would still emit heartbeats: "
            + ", ".join(description["heartbeat_only_pairs"]),
        ]
    if description["warnings"]:
        out += ["", "Warnings"] + [f"  {w}" for w in description["warnings"]]
    return "\n".join(out)


def render_family_markdown(flow: FlowConfig, family: str) -> str:
    """Markdown for a mirror DAG's docs: what it copies, where to, how often, and the settings that matter.

    Only settings that differ from MM2's or mirrorflow's defaults are listed (with where each was
    set), so an operator sees what is special about this flow; values are redacted.
    """
    fam = flow.family(family)
    info = describe_flow(flow)
    topics = f"`{fam.topics}`" if fam.topics is not None else "every replicated topic no other family claims"
    example = flow.policy.format_remote_topic(flow.source, "orders")
    out = [
        f"# Mirror `{flow.source}` → `{flow.target}`, family `{fam.name}`",
        "",
        (
            f"Copies what is new in the **{fam.name}** topics of cluster `{flow.source}` to cluster "
            f"`{flow.target}` on every run (incremental micro-batches with Spark), with "
            f"**{flow.delivery}** delivery. Topic `orders` on `{flow.source}` becomes `{example}` on `{flow.target}`."
        ),
        "",
        "| | |",
        "|---|---|",
        f"| Topic patterns | {topics} |",
        f"| Flow topic filter | `{flow.get('topics')}` (excluded: `{flow.get('topics.exclude')}`) |",
        f"| Schedule | `{fam.schedule.text}` |",
        f"| Delivery | {flow.delivery} |",
        f"| Replication policy | {info['policy']} |",
        "",
        (
            "**Tasks**: `check_clusters` (both clusters answer) → `prepare_target` (remote topics, partitions, "
            "configs) → `replicate` (ACLs when due, then the copy on the engine the `spark_default` connection names: "
            "a Spark Connect server, or spark-submit of `mirrorflow/spark_app/mirror_family.py`) → `publish_report` (per-partition records and lag; an asset event for the checkpoints DAG)."
        ),
        "",
        (
            "**Run now**: *Trigger DAG* in the UI; the form can keep the run going for a while "
            "(continuous micro-batches) or copy only some topics."
        ),
        "",
        "## Internal topics",
        "",
    ]
    out += [f"- {name}: `{where}`" for name, where in info["internal_topics"].items()]
    other_families = tuple(f"mirrorflow.family.{f.name}." for f in flow.families if f.name != fam.name)
    changed = {
        k: v
        for k, v in info["settings"].items()
        if not str(v["origin"]).endswith("default") and not k.startswith(other_families)
    }
    out += ["", "## Settings that differ from the defaults", ""]
    if changed:
        out += ["| Key | Value | Set in |", "|---|---|---|"]
        out += [f"| `{k}` | `{v['value']}` | {v['origin']} |" for k, v in changed.items()]
    else:
        out.append("None: MM2's defaults throughout.")
    return "\n".join(out) + "\n"


def _rows(props: dict[str, dict[str, str | None]], indent: int) -> list[str]:
    width = max((len(k) for k in props), default=0)
    return [f"{' ' * indent}{k:<{width}} = {v['value']}    [{v['origin']}]" for k, v in props.items()]
