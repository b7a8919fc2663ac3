"""MM2's OffsetSyncStore sparse history and translation rule (Kafka's ``OffsetSyncStore``).

Ported from Kafka's ``OffsetSyncStoreTest`` (3.6+, KAFKA-15202, plus the ``initializationMustReadToEnd``
cases of 3.7+): the same sync sequences must keep the same syncs and translate to the same offsets as MM2,
because a different history would checkpoint consumer groups at different downstream offsets than MM2.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import pytest

from mirrorflow.checkpoints.syncstore import OffsetSyncStore, Sync, SyncHistory

TOPIC = "topic1"
PARTITION = 2
LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


def java_long(value: int) -> int:
    """Wrap to a Java ``long``, so that the invariant checks below overflow exactly as the Java test's do."""
    return ((value - LONG_MIN) & ((1 << 64) - 1)) + LONG_MIN


def history_of(store: OffsetSyncStore) -> SyncHistory:
    history = store.history(TOPIC, PARTITION)
    assert history is not None
    return history


def assert_sparse_sync_invariant(history: SyncHistory) -> None:
    """Invariants B and C over every pair of slots, exactly as Java's ``assertSparseSyncInvariant`` checks them.

    Like the Java test, pairs with equal upstream offsets are skipped, and a bound that overflows negative
    is skipped (for C the whole pair is skipped, for B only B).
    """
    upstreams = [history.slot(index).upstream for index in range(SyncHistory.SLOTS)]
    for j in range(SyncHistory.SLOTS):
        j_upstream = upstreams[j]
        for i in range(j):
            i_upstream = upstreams[i]
            if i_upstream == j_upstream:
                continue
            exponent = max(i - 2, 0)
            lower = java_long(j_upstream + (1 << exponent))
            if lower < 0:
                continue
            assert i_upstream >= lower, f"Invariant C({i},{j}): {i_upstream} < {lower} ({j_upstream} + 2^{exponent})"
            upper = java_long(j_upstream + java_long(1 << j) - (1 << i))
            if upper < 0:
                continue
            assert i_upstream <= upper, f"Invariant B({i},{j}): {i_upstream} > {upper} ({j_upstream} + 2^{j} - 2^{i})"


def count_distinct_stored_syncs(history: SyncHistory) -> int:
    """Java's ``countDistinctStoredSyncs``: identity changes between adjacent slots, plus one."""
    slots = [history.slot(index) for index in range(SyncHistory.SLOTS)]
    return 1 + sum(1 for previous, current in itertools.pairwise(slots) if previous is not current)


def assert_sparse_sync(store: OffsetSyncStore, sync_offset: int, previous_offset: int) -> None:
    """Java's ``assertSparseSync``: ``sync_offset`` is kept, and the kept sync just below it is ``previous_offset``.

    With downstream == upstream in these tests, a group just below the sync translates one past the
    previous kept sync (or -1 when there is none), exactly at it to it, and past it to one past it.
    """
    expected_below = -1 if previous_offset == -1 else previous_offset + 1
    assert store.translate_mm2(TOPIC, PARTITION, sync_offset - 1) == expected_below
    assert store.translate_mm2(TOPIC, PARTITION, sync_offset) == sync_offset
    assert store.translate_mm2(TOPIC, PARTITION, sync_offset + 1) == sync_offset + 1
    assert store.translate_mm2(TOPIC, PARTITION, sync_offset + 2) == sync_offset + 1


def kept_upstreams(store: OffsetSyncStore) -> list[int]:
    return sorted(sync.upstream for sync in history_of(store).syncs())


# --- translation rules (testOffsetTranslation, testNoTranslationIfStoreNotStarted, ...NoOffsetSync) ---


def test_offset_translation() -> None:
    store = OffsetSyncStore()
    store.finish_initial_read()

    # Older than U: one past the sync, never dead-reckoned (the +1 rule).
    store.add(TOPIC, PARTITION, 100, 200)
    assert store.translate_mm2(TOPIC, PARTITION, 150) == 201

    # Equal to U: exact.
    store.add(TOPIC, PARTITION, 150, 251)
    assert store.translate_mm2(TOPIC, PARTITION, 150) == 251

    # Older than every sync: -1, which the checkpoint task drops.
    assert store.translate_mm2(TOPIC, PARTITION, 5) == -1

    # Downstream offsets reset: taken as they come.
    store.add(TOPIC, PARTITION, 200, 10)
    assert store.translate_mm2(TOPIC, PARTITION, 200) == 10

    # Upstream offsets reset: a rewind clears the history.
    store.add(TOPIC, PARTITION, 20, 20)
    assert store.translate_mm2(TOPIC, PARTITION, 20) == 20
    assert [(sync.upstream, sync.downstream) for sync in history_of(store).syncs()] == [(20, 20)]


def test_no_translation_if_store_not_started() -> None:
    store = OffsetSyncStore()
    # No syncs and not read to end.
    for upstream in (0, 100, 200):
        assert store.translate_mm2(TOPIC, PARTITION, upstream) is None

    # A sync read during startup is still not used.
    store.add(TOPIC, PARTITION, 100, 200)
    for upstream in (0, 100, 200):
        assert store.translate_mm2(TOPIC, PARTITION, upstream) is None
    # lookup ignores readiness: it is what translation will use once started.
    assert store.lookup(TOPIC, PARTITION, 150) == Sync(100, 200)

    # After the initial read everything is visible.
    store.finish_initial_read()
    assert store.translate_mm2(TOPIC, PARTITION, 0) == -1
    assert store.translate_mm2(TOPIC, PARTITION, 100) == 200
    assert store.translate_mm2(TOPIC, PARTITION, 200) == 201


def test_no_translation_if_no_offset_sync() -> None:
    store = OffsetSyncStore()
    store.finish_initial_read()
    assert store.translate_mm2(TOPIC, PARTITION, 0) is None
    assert store.lookup(TOPIC, PARTITION, 0) is None
    assert store.partitions() == []
    # Syncs of another partition do not make this one translatable.
    store.add(TOPIC, PARTITION + 1, 0, 0)
    assert store.translate_mm2(TOPIC, PARTITION, 0) is None
    assert store.partitions() == [(TOPIC, PARTITION + 1)]


def test_partitions_are_independent_and_sorted() -> None:
    store = OffsetSyncStore()
    store.finish_initial_read()
    store.add("b", 0, 10, 1)
    store.add("a", 1, 50, 2)
    store.add("a", 0, 30, 3)
    assert store.partitions() == [("a", 0), ("a", 1), ("b", 0)]
    assert store.translate_mm2("a", 0, 30) == 3
    assert store.translate_mm2("a", 1, 30) == -1
    assert store.translate_mm2("b", 0, 11) == 2


# --- KAFKA-15202 precision (testPastOffsetTranslation and ...WithoutInitializationReadToEnd) ---


@pytest.mark.parametrize("resume_at", [1010, 1000], ids=["continue-after-1000", "resend-1000"])
def test_past_offset_translation_must_read_to_end(resume_at: int) -> None:
    """Syncs every 10 offsets, 0..1000 during the initial read, then up to 10000.

    The Java 3.6 test resumes at 1010 (its loop variable continues); the 3.7+ one is written with its own
    loops. Whether 1000 is sent again after the start does not change what is kept, so both are checked.
    """
    max_offset_lag = 10
    store = OffsetSyncStore(must_read_to_end=True)
    for offset in range(0, 1001, max_offset_lag):
        store.add(TOPIC, PARTITION, offset, offset)
        assert_sparse_sync_invariant(history_of(store))
    store.finish_initial_read()

    # Only the last sync of the initial read is kept: nothing older can be translated.
    assert kept_upstreams(store) == [1000]
    assert_sparse_sync(store, 1000, -1)

    for offset in range(resume_at, 10001, max_offset_lag):
        store.add(TOPIC, PARTITION, offset, offset)
        assert_sparse_sync_invariant(history_of(store))

    # Invariant D: the last sync of the initial read is still the floor.
    assert_sparse_sync(store, 1000, -1)
    # Older offsets are translated less precisely.
    expected = [1000, 4840, 6760, 8680, 9160, 9640, 9880, 9940, 9970, 9990, 10000]
    assert kept_upstreams(store) == expected
    for previous, kept in itertools.pairwise(expected):
        assert_sparse_sync(store, kept, previous)

    # An upstream rewind clears every historical sync.
    store.add(TOPIC, PARTITION, 1500, 11000)
    assert_sparse_sync_invariant(history_of(store))
    assert kept_upstreams(store) == [1500]
    assert store.translate_mm2(TOPIC, PARTITION, 1499) == -1
    assert store.translate_mm2(TOPIC, PARTITION, 1500) == 11000
    assert store.translate_mm2(TOPIC, PARTITION, 2000) == 11001


@pytest.mark.parametrize("resume_at", [1000, 1010], ids=["resend-1000", "continue-after-1000"])
def test_past_offset_translation_without_initialization_read_to_end(resume_at: int) -> None:
    """Same syncs, but previous checkpoints were loaded, so the initial read keeps its full history."""
    max_offset_lag = 10
    store = OffsetSyncStore(must_read_to_end=False)
    for offset in range(0, 1001, max_offset_lag):
        store.add(TOPIC, PARTITION, offset, offset)
        assert_sparse_sync_invariant(history_of(store))
    store.finish_initial_read()

    # The startup history is translatable right away.
    assert kept_upstreams(store) == [0, 480, 720, 840, 900, 960, 990, 1000]
    assert_sparse_sync(store, 480, 0)
    assert_sparse_sync(store, 720, 480)
    assert_sparse_sync(store, 1000, 990)

    for offset in range(resume_at, 10001, max_offset_lag):
        store.add(TOPIC, PARTITION, offset, offset)
        assert_sparse_sync_invariant(history_of(store))

    # 1000 was expired; below 3840 only the oldest sync, 0, is left.
    expected = [0, 3840, 7680, 8640, 9120, 9600, 9840, 9900, 9960, 9990, 10000]
    assert kept_upstreams(store) == expected
    for previous, kept in itertools.pairwise(expected):
        assert_sparse_sync(store, kept, previous)


def test_rewind_during_initial_read_without_read_to_end_clears() -> None:
    """Without must_read_to_end the initial read is a normal update, so a rewind in it still clears."""
    store = OffsetSyncStore(must_read_to_end=False)
    for offset in (0, 100, 200):
        store.add(TOPIC, PARTITION, offset, offset)
    assert kept_upstreams(store) == [0, 100, 200]
    store.add(TOPIC, PARTITION, 50, 500)
    assert kept_upstreams(store) == [50]


# --- SyncHistory directly ---


def test_empty_history() -> None:
    history = SyncHistory()
    assert history.latest is None
    assert history.lookup(0) is None
    assert history.syncs() == []
    with pytest.raises(LookupError):
        history.slot(0)


def test_first_sync_fills_every_slot_and_clear_refills() -> None:
    history = SyncHistory()
    first = Sync(100, 100)
    history.update(first)
    assert all(history.slot(index) is first for index in range(SyncHistory.SLOTS))
    history.update(Sync(200, 200))
    cleared = Sync(300, 300)
    history.update(cleared, clear=True)
    assert history.syncs() == [cleared]
    assert history.latest is cleared
    with pytest.raises(LookupError):
        history.slot(SyncHistory.SLOTS)


def test_distinct_means_identity_not_equality() -> None:
    """Two syncs read with the same offsets are two entries, as Java compares references."""
    history = SyncHistory()
    first, again = Sync(1000, 1000), Sync(1000, 1000)
    history.update(first)
    history.update(again)
    assert history.latest is again
    assert history.slot(1) is first
    assert len(history.syncs()) == 2
    assert count_distinct_stored_syncs(history) == 2
    # Equal upstream is not a rewind.
    assert history.lookup(1000) is again


def test_lookup_is_first_slot_at_or_below_else_oldest() -> None:
    history = SyncHistory()
    for offset in range(0, 101, 10):
        history.update(Sync(offset, offset * 2))
    kept = history.syncs()
    assert [sync.upstream for sync in kept] == sorted((sync.upstream for sync in kept), reverse=True)
    for upstream in range(-5, 120):
        found = history.lookup(upstream)
        assert found is not None
        candidates = [sync for sync in kept if sync.upstream <= upstream]
        assert found is (candidates[0] if candidates else history.slot(SyncHistory.SLOTS - 1))


def test_bounds_overflow_like_java_longs() -> None:
    """Near Long.MAX_VALUE the Java bounds wrap negative and are skipped; the port must not diverge or crash."""
    history = SyncHistory()
    history.update(Sync(0, 0))
    offset = 0
    step = 1 << 56
    for _ in range(120):
        offset = min(offset + step, LONG_MAX)
        history.update(Sync(offset, offset))
        assert_sparse_sync_invariant(history)
        assert history.slot(0).upstream == offset
        assert history.slot(SyncHistory.SLOTS - 1).upstream == 0
    assert history.lookup(LONG_MAX) is history.latest
    store = OffsetSyncStore()
    store.finish_initial_read()
    store.add(TOPIC, PARTITION, LONG_MAX, LONG_MAX)
    # downstream + 1 wraps as Java's long addition does.
    assert store.translate_mm2(TOPIC, PARTITION, LONG_MAX) == LONG_MAX


def test_slot_63_bound_wraps_positive_as_in_java() -> None:
    """A case where only exact ``long`` emulation gives MM2's result, derived by hand from the Java code.

    After syncs at 0 and Long.MAX_VALUE, invariant B between slots 62 and 63 has the bound
    ``0 + (1L << 63) - (1L << 62)``, which Java wraps from -3 * 2^62 to +2^62: the check is not skipped and
    fails, so the sync at 0 is replaced in slot 63 too and only the Long.MAX_VALUE sync is kept. Computing the
    bound without the wrap-around (negative, hence skipped) would keep 0 in slot 63 instead.
    """
    history = SyncHistory()
    history.update(Sync(0, 0))
    history.update(Sync(LONG_MAX, 1))
    assert history.syncs() == [Sync(LONG_MAX, 1)]
    # One bit lower, nothing wraps and slot 63 keeps the first sync (invariant D).
    history = SyncHistory()
    history.update(Sync(0, 0))
    history.update(Sync(1 << 62, 1))
    assert history.syncs() == [Sync(1 << 62, 1), Sync(0, 0)]


@pytest.mark.parametrize("bad", [1 << 63, LONG_MIN - 1])
def test_offsets_must_fit_a_java_long(bad: int) -> None:
    with pytest.raises(ValueError, match="64-bit"):
        Sync(bad, 0)
    with pytest.raises(ValueError, match="64-bit"):
        Sync(0, bad)
    with pytest.raises(TypeError):
        Sync(1.5, 0)  # type: ignore[arg-type]


# --- bounded expirations (testConsistentlySpacedSyncs, testRandomlySpacedSyncs, testDroppedSyncsSpacing) ---


def assert_sync_spacing_has_bounded_expirations(
    first_offset: int, steps: Iterable[int], maximum_expirations: int
) -> None:
    """Java's ``assertSyncSpacingHasBoundedExpirations``: each new sync expires at most ``maximum_expirations``."""
    store = OffsetSyncStore()
    store.finish_initial_read()
    store.add(TOPIC, PARTITION, first_offset, first_offset)
    history = history_of(store)
    offset = first_offset
    last_count = 1
    for step in steps:
        offset += step
        assert 0 <= offset <= LONG_MAX, "test is invalid, offset overflowed"
        store.add(TOPIC, PARTITION, offset, offset)
        # Invariant A: the latest sync is present. Invariant D: the earliest sync is present.
        assert history.slot(0).upstream == offset
        assert history.slot(SyncHistory.SLOTS - 1).upstream == first_offset
        count = count_distinct_stored_syncs(history)
        expired = last_count - count + 1
        assert expired <= maximum_expirations, f"expired {expired} > {maximum_expirations} at offset {offset}"
        last_count = count


@pytest.mark.slow
def test_consistently_spaced_syncs() -> None:
    """Regularly spaced syncs (offset.lag.max) expire at most one sync per new sync, for every step size."""
    iterations = 100
    max_step = LONG_MAX // iterations
    step = 1
    while step < max_step:
        for first_offset in range(30):
            assert_sync_spacing_has_bounded_expirations(first_offset, [step] * iterations, 1)
        step = step * 2 + 1


@pytest.mark.slow
def test_randomly_spaced_syncs() -> None:
    """Steps differing by at most n bits expire at most n + 2 syncs at once (Java uses its own Random(0))."""
    rng = random.Random(0)
    iteration_bits = 10
    iterations = 1 << iteration_bits
    for n in range(1, 64 - iteration_bits):
        maximum_difference = 1 << n
        maximum_expirations = n + 2
        steps = [rng.randrange(0, maximum_difference) for _ in range(iterations)]
        assert_sync_spacing_has_bounded_expirations(0, steps, maximum_expirations)
        offset_lag_max = 1 << 16
        steps = [rng.randrange(offset_lag_max, offset_lag_max + maximum_difference) for _ in range(iterations)]
        assert_sync_spacing_has_bounded_expirations(0, steps, maximum_expirations)


def test_dropped_syncs_spacing() -> None:
    """Half the gaps doubled, as if a sync was dropped: at most two syncs expire at once."""
    rng = random.Random(0)
    offset_lag_max = 100
    steps = [(2 if rng.random() < 0.5 else 1) * offset_lag_max for _ in range(10000)]
    assert_sync_spacing_has_bounded_expirations(0, steps, 2)


# --- properties over random update sequences ---


def random_sequence(rng: random.Random, count: int) -> list[Sync]:
    """Syncs as the offset-syncs topic could carry them: mixed gaps, repeats, rare rewinds, huge offsets.

    Downstream offsets only advance (by at most the upstream gap, as filters and compaction only drop
    records), except at a rewind, which is the situation in which MM2 promises monotonic translation.
    """
    syncs: list[Sync] = []
    upstream = rng.choice([0, 12345, LONG_MAX - (1 << 40)])
    downstream = 0
    for _ in range(count):
        roll = rng.random()
        if roll < 0.01:
            upstream = rng.randrange(0, max(upstream, 1))
        elif roll < 0.05:
            pass  # the same upstream offset again, as a new object
        else:
            shape = rng.random()
            if shape < 0.5:
                gap = rng.randrange(1, 200)
            elif shape < 0.8:
                gap = rng.randrange(1, 1 << rng.randrange(1, 40))
            else:
                gap = 1 << rng.randrange(0, 63)
            if upstream + gap > LONG_MAX:
                upstream = rng.randrange(0, 1 << 20)
            else:
                upstream += gap
                downstream += rng.randrange(0, min(gap, 1000) + 1)
        syncs.append(Sync(upstream, downstream))
    return syncs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_invariants_hold_after_random_updates(seed: int) -> None:
    rng = random.Random(seed)
    history = SyncHistory()
    for number, sync in enumerate(random_sequence(rng, 3000)):
        history.update(sync)
        # Invariant A.
        assert history.latest is sync
        # Distinct syncs occupy contiguous runs of slots, so identity-distinct == adjacent changes.
        assert len(history.syncs()) == count_distinct_stored_syncs(history)
        if number < 300 or number % 7 == 0:
            assert_sparse_sync_invariant(history)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_translation_is_monotonic_in_upstream_for_a_fixed_state(seed: int) -> None:
    rng = random.Random(seed)
    store = OffsetSyncStore()
    store.finish_initial_read()
    syncs = random_sequence(rng, 4000)
    for number, sync in enumerate(syncs):
        store.add(TOPIC, PARTITION, sync.upstream, sync.downstream)
        if number % 400 != 399:
            continue
        kept = history_of(store).syncs()
        probes = {sync.upstream + delta for sync in kept for delta in (-1, 0, 1, 2)}
        probes.update(rng.randrange(0, LONG_MAX) for _ in range(50))
        probes.update((0, LONG_MAX))
        previous = -1
        for upstream in sorted(probe for probe in probes if 0 <= probe <= LONG_MAX):
            translated = store.translate_mm2(TOPIC, PARTITION, upstream)
            assert translated is not None
            assert translated >= previous, f"translation of {upstream} went back from {previous} to {translated}"
            previous = translated
