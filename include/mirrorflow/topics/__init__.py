"""Discovery and target preparation: the first step of one replication run of one flow and family.

Before records are copied, the target must have every remote topic with at least the source's partition
count, and the configs and ACLs that MM2's ``MirrorSourceConnector`` would keep in sync. MM2 does this on
timers (``refresh.topics``, ``sync.topic.configs``, ``sync.topic.acls``); mirrorflow creates and grows topics
at the start of each run, so a run never copies into a topic that is missing or too small, syncs configs and
ACLs on MM2's timers, and an operator sees in the run report what changed.

Rules follow MM2's ``MirrorSourceConnector`` (``createNewTopics``, ``syncTopicConfigs``, ``syncTopicAcls``):
partitions are only ever added, configs are changed incrementally, ACLs are only ever created. A problem with
one topic is recorded in the report and never stops the others.

The modules import in one direction: ``plan`` (what to replicate, the report) and ``admin_calls`` (waiting on
admin futures) below ``configs`` and ``acls`` (the two syncs), below ``prepare`` (creation, growth and the
order of the steps). Callers import from ``mirrorflow.topics``, which re-exports what they use.
"""

from __future__ import annotations

from .acls import remote_acl_bindings
from .configs import DELETED, config_changes, creation_configs
from .plan import CreatedTopic, PreparationReport, TopicPlan, acl_to_dict, discover, only
from .prepare import prepare_family, prepare_target, sync_not_due

__all__ = [
    "DELETED",
    "CreatedTopic",
    "PreparationReport",
    "TopicPlan",
    "acl_to_dict",
    "config_changes",
    "creation_configs",
    "discover",
    "only",
    "prepare_family",
    "prepare_target",
    "remote_acl_bindings",
    "sync_not_due",
]
