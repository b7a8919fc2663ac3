"""The best valid answer: one choice between a fresh translation and the checkpoint already on the target.

Why this exists: MM2's offset-sync store loses precision for old offsets as new syncs arrive (and the
offset-syncs topic is compacted on a real cluster), so what MM2 knew about an old committed offset survives
only in its **checkpoints**. A checkpoint ``(group, remote topic, partition, upstream U', downstream D')``
says: a consumer resuming at D' reads every record at or after source offset U'. It is valid for any
committed offset U >= U' (it re-reads more, never skips), and MM2 keeps it, instead of writing a worse one,
as long as its own translation does not move forward; ``RemoteClusterUtils.translateOffsets`` then returns
it. Translating again from what the syncs say today can be far worse (tens of thousands of records re-read
where MM2's checkpoint re-reads a few hundred), so every translation in mirrorflow (``translate``, checkpoint
emission, group offset sync, failover and failback) asks :func:`choose` and names the basis it used:

* an **exact** translation (mirrorflow's copied runs, or a sync pinning the very record) beats everything;
* otherwise the valid answer with the **highest downstream offset** wins (fewest re-reads, no skip): the
  fresh approximate translation (copied runs or MM2's rule on the offset syncs), or the existing checkpoint;
  on a tie the fresh translation is named (it knows its re-reads); emission does not rewrite an equal
  checkpoint either way (``emit.should_emit``);
* a checkpoint for a *later* upstream offset than the group's (the group was rewound) is not valid: it
  could skip the records between, so it is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..wire import Checkpoint
from .translate import EXISTING_CHECKPOINT, OffsetTranslator, Translation

#: ``kind`` of an answer taken from a checkpoint: as good as the checkpoint, whose own exactness is not recorded.
CHECKPOINT = "checkpoint"

#: (group, remote topic, partition) -> the last checkpoint, as ``emit.read_checkpoints`` returns them.
Checkpoints = Mapping[tuple[str, str, int], Checkpoint]


def valid_for(checkpoint: Checkpoint | None, upstream: int) -> bool:
    """Whether resuming at the checkpoint's downstream offset skips nothing for a group committed at ``upstream``."""
    return checkpoint is not None and checkpoint.downstream_offset >= 0 and checkpoint.upstream_offset <= upstream


def choose(
    translation: Translation | None,
    checkpoint: Checkpoint | None,
    upstream: int,
    reference: tuple[int, int] | None = None,
) -> Translation:
    """The best valid answer for a group committed at ``upstream``, from a fresh translation and a checkpoint.

    ``translation`` may be None (no offset syncs readable, e.g. they lie on a source that is down); the
    checkpoint must be the group's own for the same remote topic and partition (or None). ``reference`` is a
    known (upstream, downstream) pair of the partition (the sync MM2's lookup picks) to count re-reads from
    when the fresh translation has no offset (refused: every sync kept is newer).
    """
    fresh = translation or Translation(upstream, None, "unavailable", reason="no offset syncs read")
    if fresh.kind == "exact" or not valid_for(checkpoint, upstream):
        return fresh
    assert checkpoint is not None
    if fresh.downstream is not None and fresh.downstream >= checkpoint.downstream_offset:
        return fresh
    return from_checkpoint(checkpoint, upstream, fresh, reference)


def from_checkpoint(
    checkpoint: Checkpoint, upstream: int, fresh: Translation, reference: tuple[int, int] | None = None
) -> Translation:
    """The checkpoint as the answer, with its re-reads counted the way the translator counts them.

    The translator counts upstream offsets, as if each were one record copied once (MM2's +1 rule does the
    same). Under that convention the record at the checkpoint's downstream offset D' is the copy of upstream
    ``u + (D' - d)`` for any known pair (u, d): ``fresh`` itself (its offset is one past its sync), or
    ``reference``. The re-reads are the upstream offsets from there to the committed one, and never fewer
    than the ``upstream - U'`` the group consumed since the checkpoint's own offset. With neither, only
    those are counted, and the reason says the rest is not known.
    """
    since = upstream - checkpoint.upstream_offset
    d = checkpoint.downstream_offset
    same = "for this very committed offset" if since == 0 else f"for upstream {checkpoint.upstream_offset}"
    reason = f"the checkpoint already on the target {same}"
    if fresh.downstream is not None:
        rereads = max(since, fresh.rereads - (d - fresh.downstream))
        reason += f"; a new translation gives {fresh.downstream} ({fresh.basis or fresh.kind})"
    elif reference is not None:
        rereads = max(since, upstream - (reference[0] + d - reference[1]))
        reason += f"; a new translation is {fresh.kind}"
    else:
        rereads = since
        reason += "; how many records it re-reads is not known"
    return Translation(upstream, d, CHECKPOINT, rereads, reason, EXISTING_CHECKPOINT)


@dataclass(frozen=True)
class BestTranslator:
    """A flow's translator (None when its syncs cannot be read) and the checkpoints on the target, asked together.

    ``translate`` is for a group's committed offset read now (live); ``resolve`` for a checkpoint alone (a
    disaster, or the group offset sync): the checkpoint's own upstream offset is translated again, so a
    checkpoint written before the copy reached it gives way to the exact translation the copy allows now.
    """

    translator: OffsetTranslator | None
    checkpoints: Checkpoints

    def translate(self, group: str, source_topic: str, remote_topic: str, partition: int, upstream: int) -> Translation:
        """The best answer for ``group`` committed at ``upstream`` on ``source_topic[partition]``."""
        return self._choose(source_topic, partition, upstream, self.checkpoints.get((group, remote_topic, partition)))

    def resolve(self, checkpoint: Checkpoint, source_topic: str) -> Translation:
        """The best answer for the committed offset a checkpoint recorded."""
        return self._choose(source_topic, checkpoint.partition, checkpoint.upstream_offset, checkpoint)

    def _choose(self, source_topic: str, partition: int, upstream: int, checkpoint: Checkpoint | None) -> Translation:
        if self.translator is None:
            return choose(None, checkpoint, upstream)
        fresh = self.translator.translate(source_topic, partition, upstream)
        if fresh.kind == "exact" or not valid_for(checkpoint, upstream):
            return fresh  # what ``choose`` answers first: the reference sync is not needed
        sync = self.translator.store.lookup(source_topic, partition, upstream)
        return choose(fresh, checkpoint, upstream, None if sync is None else (sync.upstream, sync.downstream))


__all__ = ["CHECKPOINT", "BestTranslator", "Checkpoints", "choose", "from_checkpoint", "valid_for"]
