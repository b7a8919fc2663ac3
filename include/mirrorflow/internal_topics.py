"""Internal topics: created exactly as MM2 creates them, never by a metadata request, and checked at start.

MM2 creates its topics itself (offset syncs, checkpoints and heartbeats with 1 partition, Connect's
offsets topic with ``offset.storage.partitions``; all ``cleanup.policy=compact``, each with its replication
factor). If a client's metadata request reaches the broker first, Apache Kafka's defaults
(``auto.create.topics.enable=true`` on the broker, ``allow.auto.create.topics=true`` for librdkafka's
producer-type handles, which the AdminClient is) create the topic with the broker's defaults instead:
1 partition, ``cleanup.policy=delete``, ``default.replication.factor``. Progress, offset syncs and
checkpoints would then silently expire with the retention. So the existence check here is
``CreateTopics`` itself (``TOPIC_ALREADY_EXISTS`` means it exists) and ``describe_topics`` (a metadata
request that never auto-creates), every client of mirrorflow sets ``allow.auto.create.topics=false``,
and an existing topic that differs from MM2's layout is reported with the command that fixes it: at
start, in the log and in the returned :class:`TopicState`. With ``mirrorflow.internal.topics.fix=true``
mirrorflow alters wrong topic configs itself; partition counts it never changes (see :func:`_partition_problem`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from .config.model import FlowConfig, Side
from .kafka import clients
from .kafka.errors import is_retriable, kafka_words
from .kafka.retries import outcomes

log = logging.getLogger(__name__)

#: When true, mirrorflow alters the configs of existing internal topics that differ (cleanup policy).
FIX_KEY = "mirrorflow.internal.topics.fix"

COMPACT: Mapping[str, str] = {"cleanup.policy": "compact"}


@dataclass(frozen=True)
class InternalTopic:
    """How an internal topic must look: created so, and compared with on an existing topic.

    ``keys_follow_partitions``: where a key lives depends on the partition count (Connect's offsets topic,
    mirrorflow's progress), so an existing topic's count is used as it is, as Connect does.
    """

    name: str
    partitions: int
    replication_factor: int  # -1: the broker's default.replication.factor
    config: Mapping[str, str] = field(default_factory=lambda: dict(COMPACT))
    keys_follow_partitions: bool = False


@dataclass
class TopicState:
    """An internal topic as found (or created) at start, and what is wrong with it."""

    topic: str
    cluster: str
    partitions: int
    created: bool = False
    problems: list[str] = field(default_factory=list)  # each names the command that fixes it
    fixed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "cluster": self.cluster,
            "partitions": self.partitions,
            "created": self.created,
            "problems": list(self.problems),
            "fixed": list(self.fixed),
        }


def ensure_internal_topic(
    flow: FlowConfig,
    side: Side,
    topic: InternalTopic,
    *,
    admin: AdminClient | None = None,
    timeout: float = 30.0,
) -> TopicState:
    """Create ``topic`` on the flow's ``side`` if missing, else check it (and fix it, if the flow allows)."""
    state = ensure_topic(
        admin if admin is not None else clients.admin(flow, side),
        topic,
        cluster=flow.source if side == "source" else flow.target,
        bootstrap=flow.client_config(side, "admin").get("bootstrap.servers", "<bootstrap>"),
        fix=flow.get_bool(FIX_KEY),
        timeout=timeout,
    )
    for problem in state.problems:
        log.warning("%s: internal topic %s", flow.name, problem)
    for done in state.fixed:
        log.warning("%s: internal topic %s", flow.name, done)
    return state


def ensure_topic(
    admin: AdminClient,
    topic: InternalTopic,
    *,
    cluster: str,
    bootstrap: str,
    fix: bool = False,
    timeout: float = 30.0,
) -> TopicState:
    """The cluster-level step of :func:`ensure_internal_topic` (no flow needed; nothing logged)."""
    deadline = time.monotonic() + timeout
    new = NewTopic(
        topic.name,
        num_partitions=topic.partitions,
        replication_factor=topic.replication_factor,
        config=dict(topic.config),
    )
    create_error: KafkaError | None = None
    asked = outcomes(
        lambda topics: admin.create_topics(topics, operation_timeout=timeout, request_timeout=timeout),
        [new],
        lambda t: t.topic,
        timeout,
    )[topic.name]
    if isinstance(asked, KafkaException):
        create_error = asked.args[0]
    elif isinstance(asked, TimeoutError):
        create_error = KafkaError(KafkaError._TIMED_OUT, f"no answer to CreateTopics within {timeout:.0f} s")
    elif asked is not None:
        raise asked  # anything else is no answer of Kafka's: as before the retries, it is not swallowed
    if create_error is None:
        # Creation is asynchronous: readers and writers come next, so wait until every partition has a leader.
        if _wait_described(admin, topic.name, deadline, leaders=True) is None:
            raise RuntimeError(f"internal topic {topic.name} on {cluster} did not appear within {timeout:.0f} s")
        return TopicState(topic.name, cluster, topic.partitions, created=True)
    exists = create_error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    # Not created and not "already exists" (no CREATE permission, a creation policy): usable if it exists.
    description = _wait_described(admin, topic.name, deadline if exists else time.monotonic())
    if description is None:
        if exists:
            raise RuntimeError(f"internal topic {topic.name} on {cluster} exists but could not be described")
        raise RuntimeError(
            f"cannot create internal topic {topic.name} on {cluster} ({topic.partitions} partition(s), "
            f"replication factor {topic.replication_factor}): {create_error.str()}"
        )
    state = TopicState(topic.name, cluster, len(description.partitions))
    _check_partitions(state, topic, description, bootstrap)
    _check_config(admin, state, topic, bootstrap, fix, timeout)
    return state


def _wait_described(admin: AdminClient, name: str, deadline: float, leaders: bool = False) -> Any | None:
    """The topic's description (with ``leaders``: once every partition has one); None if absent by ``deadline``.

    ``describe_topics`` is a metadata request with auto-creation off, whatever the client's settings.
    """
    while True:
        remaining = max(5.0, deadline - time.monotonic())  # one full attempt even when the deadline has passed
        try:
            description = admin.describe_topics(TopicCollection([name]), request_timeout=remaining)[name].result(
                remaining
            )
            if description.partitions and (not leaders or all(p.leader is not None for p in description.partitions)):
                return description
        except KafkaException as exc:
            missing = exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
            if not missing and not is_retriable(exc.args[0]):
                raise RuntimeError(f"cannot describe internal topic {name}: {kafka_words(exc.args[0])}") from None
        except TimeoutError:
            pass  # asked again until the deadline
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


def _check_partitions(state: TopicState, topic: InternalTopic, description: Any, bootstrap: str) -> None:
    problem = _partition_problem(topic, state.partitions, bootstrap)
    if problem:
        state.problems.append(f"{topic.name} on {state.cluster}: {problem}")
    replicas = min(len(p.replicas) for p in description.partitions)
    if topic.replication_factor > 0 and replicas < topic.replication_factor:
        state.problems.append(
            f"{topic.name} on {state.cluster}: replication factor {replicas}, not {topic.replication_factor}; "
            f"raise it with kafka-reassign-partitions.sh --bootstrap-server {bootstrap} --execute "
            f"--reassignment-json-file <a plan listing {topic.replication_factor} replicas per partition>"
        )


def _partition_problem(topic: InternalTopic, actual: int, bootstrap: str) -> str | None:
    """What a wrong partition count means and how to change it; mirrorflow never changes it itself.

    Adding partitions to a topic whose keys are placed by partition count moves the keys away from what is
    stored, and a count can never be lowered; both need an operator's decision.
    """
    if actual == topic.partitions:
        return None
    delete = f"kafka-topics.sh --bootstrap-server {bootstrap} --delete --topic {topic.name}"
    if topic.keys_follow_partitions:
        return (
            f"{actual} partition(s), not {topic.partitions}; mirrorflow uses the existing {actual}, as Kafka Connect "
            "does, because the partition count decides where each key lives. Do not add partitions to it "
            "(kafka-topics.sh --alter --partitions would move keys away from their stored values). To get "
            f"{topic.partitions}, recreate it while no run and no MM2 uses it ({delete}; the next run creates it), "
            "accepting that what it stores is lost"
        )
    if actual > topic.partitions:
        return (
            f"{actual} partitions, not {topic.partitions} as MM2 creates it; MM2 and mirrorflow use partition 0 "
            f"only, so it works, but a partition count cannot be lowered: to match MM2, recreate it while nothing "
            f"uses it ({delete}; mirrorflow creates it again), accepting that its records are lost"
        )
    return (
        f"{actual} partition(s), not {topic.partitions}; add them with kafka-topics.sh --bootstrap-server "
        f"{bootstrap} --alter --topic {topic.name} --partitions {topic.partitions}"
    )


def _same(key: str, actual: str | None, wanted: str) -> bool:
    if actual is None:
        return False
    if key == "cleanup.policy":  # a list: "compact,delete" is not "compact"
        return {p.strip() for p in actual.split(",") if p.strip()} == {p.strip() for p in wanted.split(",")}
    return actual.strip() == wanted


def _check_config(
    admin: AdminClient, state: TopicState, topic: InternalTopic, bootstrap: str, fix: bool, timeout: float
) -> None:
    """Compare the topic's configs with ``topic.config``; report (or, with ``fix``, alter) what differs."""
    resource = ConfigResource(ResourceType.TOPIC, topic.name)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException as exc:
        state.problems.append(
            f"{topic.name} on {state.cluster}: its configs could not be read ({exc.args[0].str()}); check them with "
            f"kafka-configs.sh --bootstrap-server {bootstrap} --describe --entity-type topics --entity-name {topic.name}"
        )
        return
    wrong = {
        key: wanted
        for key, wanted in topic.config.items()
        if not _same(key, entries[key].value if key in entries else None, wanted)
    }
    if not wrong:
        return
    found = ", ".join(f"{k}={entries[k].value if k in entries else '(unset)'}" for k in wrong)
    wanted_text = ",".join(f"{k}={v}" for k, v in wrong.items())
    command = (
        f"kafka-configs.sh --bootstrap-server {bootstrap} --alter --entity-type topics "
        f"--entity-name {topic.name} --add-config {wanted_text}"
    )
    if fix:
        error = _alter(admin, topic.name, wrong, timeout)
        if error is None:
            state.fixed.append(f"{topic.name} on {state.cluster}: had {found}; set {wanted_text} ({FIX_KEY}=true)")
            return
        state.problems.append(
            f"{topic.name} on {state.cluster}: has {found}, must have {wanted_text}; altering it failed ({error}); "
            f"fix it with: {command}"
        )
        return
    state.problems.append(
        f"{topic.name} on {state.cluster}: has {found}, must have {wanted_text}{_why(wrong)}; fix it with: {command} "
        f"(or set {FIX_KEY}=true to let mirrorflow do it)"
    )


def _why(wrong: Mapping[str, str]) -> str:
    if wrong.get("cleanup.policy") == "compact":
        return " (not compacted, what it stores expires with the retention)"
    if wrong.get("retention.ms") == "-1":
        return " (an audit trail must never expire)"
    return ""


def _alter(admin: AdminClient, name: str, wanted: Mapping[str, str], timeout: float) -> str | None:
    """Set ``wanted`` incrementally (other overrides stay); None when done, else the broker's error."""
    resource = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in wanted.items()
        ],
    )
    try:
        admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException as exc:
        return exc.args[0].str()
    return None


__all__ = ["COMPACT", "FIX_KEY", "InternalTopic", "TopicState", "ensure_internal_topic", "ensure_topic"]
