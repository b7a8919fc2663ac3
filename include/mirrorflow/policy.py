"""Replication policies: how remote topics are named, with MirrorMaker 2's exact semantics.

Topic names are a contract with MM2's own tooling (``RemoteClusterUtils``, ``MirrorClient``): a
remote topic, checkpoints topic or offset-syncs topic named differently from MM2 would make those
tools blind. So ``DefaultReplicationPolicy`` and ``IdentityReplicationPolicy`` follow the Java
classes line by line, including Java's ``String.split`` rules, and the Java class names of a user's
``mm2.properties`` map to them. A custom policy is a Python class named by dotted path.
"""

from __future__ import annotations

from collections.abc import Mapping

from .classpath import ClassLoadError, load_class

SEPARATOR_CONFIG = "replication.policy.separator"
INTERNAL_SEPARATOR_ENABLED_CONFIG = "replication.policy.internal.topic.separator.enabled"
SOURCE_CLUSTER_ALIAS_CONFIG = "source.cluster.alias"
DEFAULT_SEPARATOR = "."


class PolicyError(ValueError):
    """A policy that cannot be loaded or configured."""


def java_split(text: str, separator: str) -> list[str]:
    """``Pattern.compile(Pattern.quote(separator)).split(text)``: Java drops trailing empty strings."""
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class ReplicationPolicy:
    """The ``ReplicationPolicy`` interface with its Java default methods.

    Subclasses implement :meth:`format_remote_topic` and :meth:`topic_source` (and may override
    :meth:`upstream_topic`); everything else follows from them as in MM2.
    """

    def configure(self, props: Mapping[str, str]) -> None:
        """Receive the connector properties (MM2's ``Configurable``); the default ignores them."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        raise NotImplementedError

    def topic_source(self, topic: str) -> str | None:
        raise NotImplementedError

    def upstream_topic(self, topic: str) -> str | None:
        raise NotImplementedError

    def original_topic(self, topic: str) -> str:
        """Follow ``upstream_topic`` until it is None or unchanged (the identity-policy guard)."""
        current = topic
        while True:
            upstream = self.upstream_topic(current)
            if upstream is None or upstream == current:
                return current
            current = upstream

    def heartbeats_topic(self) -> str:
        return "heartbeats"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(".internal")

    def is_internal_topic(self, topic: str) -> bool:
        """Kafka's, Connect's and MM2's own topics, which are never replicated."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith(("__", "."))
            or topic.endswith(("-internal", ".internal"))
        )


class DefaultReplicationPolicy(ReplicationPolicy):
    """``<source>.<topic>`` naming (``org.apache.kafka.connect.mirror.DefaultReplicationPolicy``)."""

    def __init__(self, separator: str = DEFAULT_SEPARATOR, internal_separator_enabled: bool = True) -> None:
        self.separator = DEFAULT_SEPARATOR
        self.internal_separator_enabled = True
        self._set_separator(separator, internal_separator_enabled)

    def _set_separator(self, separator: str, internal_separator_enabled: bool) -> None:
        if separator == "":
            raise PolicyError(
                f"{SEPARATOR_CONFIG} must not be empty (remote topic names could not be split back); "
                "to keep topic names unchanged use IdentityReplicationPolicy"
            )
        self.separator = separator
        self.internal_separator_enabled = internal_separator_enabled

    def configure(self, props: Mapping[str, str]) -> None:
        # As in Java, the internal-separator flag is only read when a separator is configured.
        if SEPARATOR_CONFIG in props:
            flag = str(props.get(INTERNAL_SEPARATOR_ENABLED_CONFIG, "true")).strip().lower() != "false"
            self._set_separator(props[SEPARATOR_CONFIG], flag)

    @property
    def internal_separator(self) -> str:
        return self.separator if self.internal_separator_enabled else DEFAULT_SEPARATOR

    def _internal_suffix(self) -> str:
        return self.internal_separator + "internal"

    def _checkpoints_suffix(self) -> str:
        return self.internal_separator + "checkpoints" + self._internal_suffix()

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        parts = java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return "mm2-offset-syncs" + self.internal_separator + cluster_alias + self._internal_suffix()

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return cluster_alias + self._checkpoints_suffix()

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Topic names kept unchanged (``IdentityReplicationPolicy``, MM2 3.0+).

    It cannot detect cycles, so the topology must be acyclic. Heartbeat-like topics (any name
    ending in ``heartbeats``, as in Java) still get the default prefix so lineage stays visible.
    """

    def __init__(
        self,
        source_cluster_alias: str | None = None,
        separator: str = DEFAULT_SEPARATOR,
        internal_separator_enabled: bool = True,
    ) -> None:
        super().__init__(separator, internal_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        if SOURCE_CLUSTER_ALIAS_CONFIG in props:
            self.source_cluster_alias = props[SOURCE_CLUSTER_ALIAS_CONFIG]

    @staticmethod
    def _looks_like_heartbeat(topic: str) -> bool:
        return topic.endswith("heartbeats")

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """``MirrorSourceConnector.isCycle``: does the topic's lineage already pass through the target?"""
    current = topic
    while True:
        source = policy.topic_source(current)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(current)
        if upstream is None or upstream == current:
            return False
        current = upstream


JAVA_POLICIES: dict[str, type[ReplicationPolicy]] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def policy_class(name: str) -> type[ReplicationPolicy]:
    """Map a ``replication.policy.class`` value to a policy class (Java name of a built-in, or Python path)."""
    try:
        return load_class(name, ReplicationPolicy, JAVA_POLICIES, "replication policy class")
    except ClassLoadError as exc:
        raise PolicyError(str(exc)) from None


def load_policy(name: str, props: Mapping[str, str]) -> ReplicationPolicy:
    """Instantiate and configure a policy the way a connector does (``Configurable.configure``).

    A plug-in policy is user code: whatever it raises becomes a ``PolicyError``, so a broken policy is
    a configuration error at its line, not a traceback from ``config validate``.
    """
    cls = policy_class(name)
    try:
        policy = cls()
        policy.configure(props)
    except PolicyError:
        raise
    except Exception as exc:  # a plug-in's own failure
        raise PolicyError(f"replication policy class '{name.strip()}' failed: {type(exc).__name__}: {exc}") from exc
    return policy
