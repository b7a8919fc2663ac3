"""Find a topic name two families would both claim, before any topic exists.

A topic in two families would be copied by two DAGs at once. Regex intersection is decidable for
plain regular expressions, so ``interegular`` (a maintained finite-automaton library, used by lark
and outlines) computes it and even gives an example name for the error message. Patterns it cannot
model (lookarounds, backreferences, atomic groups) are left to the run-time check in
``FlowConfig.family_of``, which names the topic and both families.
"""

from __future__ import annotations

import interegular

from ..filters import PatternList


def example_overlap(first: PatternList, second: PatternList) -> str | None:
    """A name matched by both pattern lists, or None if there is none (or it cannot be decided)."""
    if first.pattern is None or second.pattern is None:
        return None
    try:
        comparator = interegular.Comparator.from_regexes({"a": first.pattern.pattern, "b": second.pattern.pattern})
        collision = comparator.get_example_overlap("a", "b")
    except ValueError:  # "No overlap ... exists"
        return None
    except Exception:  # noqa: BLE001 - syntax interegular does not model: decided at run time instead
        return None
    # Lookarounds are approximated by interegular; only report an example both patterns really match.
    for example in (collision.main_text, collision.prefix + collision.main_text + collision.postfix):
        if first.matches(example) and second.matches(example):
            return example
    return None
