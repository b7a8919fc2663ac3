"""MM2's ``OffsetSyncStore``: the sparse exponential history of offset syncs, ported line by line.

A checkpoint is only as good as the offset sync it is translated from. MM2 (3.6+, KAFKA-14666
refined by KAFKA-15202) keeps, per source topic-partition, 64 slots of sync references laid out so
that distinct syncs are roughly one power of two apart, counted back from the latest. Memory stays at
O(64) per partition whatever the traffic, recent offsets translate precisely and old ones coarsely.

We reproduce the Java algorithm exactly, not an equivalent one, because which syncs survive decides
which downstream offset a group is checkpointed at. A different but "as good" history would give
different checkpoints from MM2 for the same offset-syncs topic, and a migration between MM2 and
mirrorflow (in either direction) would then move consumer groups backwards or forwards.
The details that matter for that (Kafka's ``OffsetSyncStore``, KAFKA-14666):

- "distinct" means object identity (Java ``==`` on references), not value equality: two syncs read
  from the topic with the same offsets are still two entries;
- the invariant bound checks are done in Java ``long`` arithmetic: ``1L << 63`` is negative, and a
  bound that wraps negative is skipped, so we wrap every bound to signed 64 bits the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

_LONG_BITS = 64
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_LONG_MASK = (1 << _LONG_BITS) - 1


def _to_long(value: int) -> int:
    """Wrap an exact integer to Java's signed 64-bit ``long`` (two's complement)."""
    return ((value - _LONG_MIN) & _LONG_MASK) + _LONG_MIN


# Java ``1L << bits`` for 0 <= bits < 64, precomputed since every update evaluates dozens of bounds:
# ``1L << 63`` is ``Long.MIN_VALUE``, negative.
_SHL = tuple(_to_long(1 << bits) for bits in range(_LONG_BITS))
# Java ``1L << Math.max(i - 2, 0)``, invariant C's minimum spacing for slot i.
_SPACING = tuple(_SHL[max(i - 2, 0)] for i in range(_LONG_BITS))


@dataclass(frozen=True)
class Sync:
    """One offset sync as the store keeps it: upstream offset U was written downstream at offset D.

    Frozen so that a sync shared by several slots cannot be changed under them. Offsets must fit in
    a Java ``long``: the overflow emulation of the invariant checks is only exact for such values.
    Equality is by value (dataclass default); the store itself compares syncs with ``is``.
    """

    upstream: int
    downstream: int

    def __post_init__(self) -> None:
        """Reject offsets Java could not hold, since MM2's arithmetic on them would differ from ours."""
        upstream, downstream = self.upstream, self.downstream
        if (
            type(upstream) is int
            and type(downstream) is int
            and _LONG_MIN <= upstream <= _LONG_MAX >= downstream >= _LONG_MIN
        ):
            return  # the common case, checked without the loop: every sync read builds one
        for name in ("upstream", "downstream"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"Sync.{name} must be an int, not {type(value).__name__}")
            if not _LONG_MIN <= value <= _LONG_MAX:
                raise ValueError(f"Sync.{name}={value} does not fit in a signed 64-bit long")


def _invariant_b(i_sync: Sync, j_sync: Sync, i: int, j: int) -> bool:
    """Invariant B for slots i < j: ``u(i) <= u(j) + 2^j - 2^i``, i.e. slot j is not too old for slot i.

    Holds trivially for the same object, and is skipped (holds) when the Java bound wraps negative.
    """
    bound = _to_long(j_sync.upstream + _SHL[j] - _SHL[i])
    return i_sync is j_sync or bound < 0 or i_sync.upstream <= bound


def _invariant_c(i_sync: Sync, j_sync: Sync, i: int) -> bool:
    """Invariant C for slots i < j: ``u(i) >= u(j) + 2^max(i-2, 0)``, i.e. distinct syncs are spread out.

    Holds trivially for the same object; unlike B, a bound that wraps negative makes C *fail*, as in Java,
    so a sync is never promoted next to one whose spacing cannot be checked.
    """
    bound = _to_long(j_sync.upstream + _SPACING[i])
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream >= bound)


class SyncHistory:
    """The 64-slot history of one source topic-partition (MM2's OffsetSyncStore array).

    Invariants kept, for slots i < j holding distinct (non-identical) syncs, u(x) being x's upstream offset:

    - A: slot 0 is the latest sync applied;
    - B: ``u(slot i) <= u(slot j) + 2^j - 2^i``;
    - C: ``u(slot i) >= u(slot j) + 2^max(i-2, 0)``;
    - D: slot 63 is the earliest sync usable for translation.

    Every update builds a new list and swaps it in with one assignment, like Java's copy-then-replace,
    so a reader on another thread sees either the old or the new history, never a half-updated one.
    """

    SLOTS = _LONG_BITS

    def __init__(self) -> None:
        """Start empty: the first sync fills every slot."""
        self._slots: list[Sync] | None = None

    def update(self, sync: Sync, *, clear: bool = False) -> None:
        """Apply one sync read from the offset-syncs topic, in topic order.

        ``clear=True`` is MM2's clear case for the initial read with ``initializationMustReadToEnd``:
        only this sync is kept, in every slot. An upstream rewind (``sync.upstream`` below the latest,
        e.g. the source topic was recreated) clears too, because every older sync is now meaningless.
        """
        slots = self._slots
        if slots is None or clear or sync.upstream < slots[0].upstream:
            # Every slot the same object satisfies B and C trivially.
            self._slots = [sync] * self.SLOTS
            return
        self._slots = _updated(slots, sync)

    def lookup(self, upstream: int) -> Sync | None:
        """MM2's ``lookupLatestSync``: the first slot, newest first, whose upstream offset is <= ``upstream``.

        Scanning newest first gives the closest sync below ``upstream``, which is the most precise one to
        translate from. When every sync is newer than ``upstream``, slot 63 (the oldest) is returned and
        the caller sees from its offset that it cannot translate. ``None`` only for an empty history.
        """
        slots = self._slots
        if slots is None:
            return None
        for sync in slots:
            if sync.upstream <= upstream:
                return sync
        return slots[-1]

    def syncs(self) -> list[Sync]:
        """The distinct syncs kept, by identity as Java counts them, in slot order (newest first)."""
        slots = self._slots
        if slots is None:
            return []
        seen: set[int] = set()
        distinct: list[Sync] = []
        for sync in slots:
            if id(sync) not in seen:
                seen.add(id(sync))
                distinct.append(sync)
        return distinct

    def slot(self, index: int) -> Sync:
        """The sync in slot ``index`` (MM2's test-only ``syncFor``), for checking invariants B and C per slot.

        Raises ``LookupError`` for an empty history or an index outside 0..63, as ``syncFor`` throws.
        """
        slots = self._slots
        if slots is None:
            raise LookupError("no syncs in this history")
        if not 0 <= index < self.SLOTS:
            raise LookupError(f"slot {index} is outside 0..{self.SLOTS - 1}")
        return slots[index]

    @property
    def latest(self) -> Sync | None:
        """The most recent sync applied (invariant A), ``None`` before the first."""
        return None if self._slots is None else self._slots[0]


def _updated(original: list[Sync], sync: Sync) -> list[Sync]:
    """MM2's ``updateSyncArray`` outside the clear case: a new slot list with ``sync`` at slot 0.

    Walks slots 1..63 carrying a replacement candidate, which starts as ``sync`` and is promoted to an
    older sync from ``original`` when that one satisfies B with the previous slot and C with both
    neighbours, so as few distinct syncs as possible are expired. The walk stops at the first slot that
    still satisfies B against its predecessor: the rest of the tail is then valid as it is. The
    replacement index only moves forward and never passes ``current``, so this is O(64).
    """
    slots_count = SyncHistory.SLOTS
    syncs = list(original)
    replacement = sync
    # Index into the original slots of the next candidate to consider as replacement.
    replacement_index = 0
    # Invariant A is violated by every new sync; repair it first.
    syncs[0] = replacement
    for current in range(1, slots_count):
        previous = current - 1
        # Java's do { ... } while (replacementIndex < current && skipOldValue).
        while True:
            old_value = original[replacement_index]
            # Not recent enough for this slot; it may still fit a later slot, where older syncs are allowed.
            is_recent = _invariant_b(syncs[previous], old_value, previous, current)
            # Too close to the previous slot: it would never be valid later either.
            separated_from_previous = _invariant_c(syncs[previous], old_value, previous)
            following = current + 1
            # Prefer keeping the existing, coarser syncs of the tail: do not crowd slot current + 1.
            separated_from_next = following >= slots_count or _invariant_c(old_value, syncs[following], current)
            # The same object in the next original slot is equivalent and need not be considered again.
            next_replacement = replacement_index + 1
            duplicate = next_replacement < slots_count and old_value is original[next_replacement]

            promote = is_recent and separated_from_previous and separated_from_next
            if promote:
                replacement = old_value
            skip = duplicate or not separated_from_previous
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break

        if _invariant_b(syncs[previous], syncs[current], previous, current):
            # B holds for this slot, so it holds for the whole (unchanged) tail.
            break
        # The slot became too old relative to its predecessor: swap in the replacement.
        syncs[current] = replacement
    return syncs


class OffsetSyncStore:
    """Per (topic, partition) histories fed in offset-syncs topic order, with MM2's initialisation rule.

    MM2 declines to translate anything until the offset-syncs topic has been read to its end once,
    because a half-read history could translate a group to a stale offset. While reading it:

    - ``must_read_to_end=True`` (MM2's ``initializationMustReadToEnd``, used when no previous checkpoints
      could be loaded): only the last sync per partition is kept. It becomes the floor (invariant D), so
      no offset older than a sync that an earlier generation may already have translated past is used,
      which keeps checkpoints monotonic without knowing the earlier checkpoints;
    - ``must_read_to_end=False`` (previous checkpoints were loaded and enforce monotonicity themselves):
      the whole startup history is kept, so older group offsets stay translatable.
    """

    def __init__(self, *, must_read_to_end: bool = True) -> None:
        """Create an empty store that has not finished its initial read."""
        self._must_read_to_end = must_read_to_end
        self._read_to_end = False
        self._histories: dict[tuple[str, int], SyncHistory] = {}

    @property
    def read_to_end(self) -> bool:
        """Whether :meth:`finish_initial_read` was called, i.e. whether translation is available."""
        return self._read_to_end

    def add(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        """Apply one offset sync for ``topic``-``partition``, in offset-syncs topic order."""
        key = (topic, partition)
        history = self._histories.get(key)
        if history is None:
            history = self._histories[key] = SyncHistory()
        history.update(Sync(upstream, downstream), clear=not self._read_to_end and self._must_read_to_end)

    def finish_initial_read(self) -> None:
        """Mark the initial read-to-end done: translation becomes available and add() updates normally."""
        self._read_to_end = True

    def history(self, topic: str, partition: int) -> SyncHistory | None:
        """The history of one partition, ``None`` when no sync was read for it."""
        return self._histories.get((topic, partition))

    def lookup(self, topic: str, partition: int, upstream: int) -> Sync | None:
        """The sync MM2 would translate ``upstream`` from (see :meth:`SyncHistory.lookup`), ignoring readiness."""
        history = self._histories.get((topic, partition))
        return None if history is None else history.lookup(upstream)

    def translate_mm2(self, topic: str, partition: int, upstream: int) -> int | None:
        """MM2's ``translateDownstream`` for a group whose committed upstream offset is ``upstream``.

        - ``None`` ("empty", no checkpoint) before the initial read finished, or with no sync for the
          partition: the raw upstream offset is never passed through;
        - ``-1`` when even the looked-up sync is newer than ``upstream``: the group is older than anything
          usable (MM2's checkpoint task drops negative offsets);
        - the sync's downstream offset when it is exactly at ``upstream``;
        - otherwise the sync's downstream offset + 1: the record at the sync's offset was consumed, but how
          many later upstream records reached the target (filters, compaction, transaction markers) is
          unknown, so going one past is the most that never skips data.
        """
        if not self._read_to_end:
            return None
        sync = self.lookup(topic, partition, upstream)
        if sync is None:
            return None
        if sync.upstream > upstream:
            return -1
        step = 0 if sync.upstream == upstream else 1
        return _to_long(sync.downstream + step)

    def partitions(self) -> list[tuple[str, int]]:
        """The (topic, partition) pairs with at least one sync, sorted for stable reports."""
        return sorted(self._histories)
