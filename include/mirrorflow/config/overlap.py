"""Find a topic name two families would both claim, before any topic exists.

A topic in two families would be copied by two DAGs at once. Regex intersection is decidable for
plain regular expressions, so ``interegular`` (a maintained finite-automaton library, used by lark
and outlines) computes it and even gives an example name for the error message. Patterns it cannot
model (lookarounds, backreferences, atomic groups), or whose automata would be too large to build
while Airflow waits, are left to the run-time check in ``FlowConfig.family_of``, which names the topic
and both families.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import interegular
import interegular.fsm

from ..filters import PatternList

# interegular builds deterministic automata, which can be exponentially large (``.*a.{16}`` does not
# finish in any useful time; docs/performance.md) while Airflow parses the file every 30 s. Every automaton it builds
# goes through ``interegular.fsm.crawl``, so that function is replaced by an equivalent one that (1) finds
# known states with a dict instead of ``list.index`` (linear instead of quadratic in the states) and
# (2) counts transitions against a budget while :func:`example_overlap` runs. Past the budget the
# overlap is left undecided: the run-time check in ``FlowConfig.family_of`` still refuses a doubly
# claimed topic. Realistic family patterns need a few hundred transitions and states;
# ``[a-zA-Z0-9._-]{1,249}`` (any topic name) about 15,000 transitions and 250 states.
TRANSITION_BUDGET = 50_000
# interegular's search for an example is quadratic in the states of the intersection (``FSM.islive``).
MAX_STATES = 600
_SEARCH_SECONDS = 0.5


class _OverBudget(Exception):
    """Raised inside interegular when a check has used up its transitions."""


_budget = threading.local()
_original_crawl = interegular.fsm.crawl


def _crawl(alphabet: Any, initial: Any, final: Callable[[Any], bool], follow: Callable[[Any, Any], Any]) -> Any:
    """``interegular.fsm.crawl`` (MIT licence), with a dict index of the states and the transition budget."""
    try:
        return _indexed_crawl(alphabet, initial, final, follow)
    except _Unhashable:  # a kind of state this version does not know: interegular's own crawl
        return _original_crawl(alphabet, initial, final, follow)


class _Unhashable(Exception):
    """A state :func:`_hashable` cannot index."""


def _indexed_crawl(alphabet: Any, initial: Any, final: Callable[[Any], bool], follow: Callable[[Any, Any], Any]) -> Any:
    left = getattr(_budget, "left", None)
    states = [initial]
    index: dict[Any, int] = {_hashable(initial): 0}
    finals = set()
    transitions: dict[int, dict[Any, int]] = {}
    i = 0
    while i < len(states):
        state = states[i]
        if final(state):
            finals.add(i)
        transitions[i] = {}
        for transition in alphabet.by_transition:
            if left is not None:
                left -= 1
                if left < 0:
                    raise _OverBudget
            try:
                nxt = follow(state, transition)
            except interegular.fsm.OblivionError:
                continue
            key = _hashable(nxt)
            j = index.get(key)
            if j is None:
                j = index[key] = len(states)
                states.append(nxt)
                if left is not None and j >= MAX_STATES:
                    raise _OverBudget
            transitions[i][transition] = j
        i += 1
    if left is not None:
        _budget.left = left
    return interegular.fsm.FSM(
        alphabet=alphabet,
        states=range(len(states)),
        initial=0,
        finals=finals,
        map=transitions,
        __no_validation__=True,
    )


def _hashable(state: Any) -> Any:
    """interegular's states: ints, frozensets, tuples, and dicts of sub-states (``parallel``)."""
    key = frozenset(state.items()) if isinstance(state, dict) else state
    try:
        hash(key)
    except TypeError:
        raise _Unhashable from None
    return key


interegular.fsm.crawl = _crawl


@lru_cache(maxsize=1024)
def example_overlap(first: PatternList, second: PatternList) -> str | None:
    """A name matched by both pattern lists, or None if there is none (or it cannot be decided).

    Cached by the lists' text: the flows of a large file usually share their family definitions, and
    building the automata is the costliest step of validation.
    """
    if first.pattern is None or second.pattern is None:
        return None
    _budget.left = TRANSITION_BUDGET
    try:
        comparator = interegular.Comparator.from_regexes({"a": first.pattern.pattern, "b": second.pattern.pattern})
        collision = comparator.get_example_overlap("a", "b", max_time=_SEARCH_SECONDS)
    except ValueError:  # "No overlap ... exists"
        return None
    except Exception:  # noqa: BLE001 - syntax interegular does not model, or over budget: decided at run time
        return None
    finally:
        _budget.left = None
    # Lookarounds are approximated by interegular; only report an example both patterns really match.
    for example in (collision.main_text, collision.prefix + collision.main_text + collision.postfix):
        if first.matches(example) and second.matches(example):
            return example
    return None
