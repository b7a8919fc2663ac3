"""Which flow each configuration error belongs to, for a partial load (``load_config(partial=True)``).

A partial load leaves out the flows whose own settings are broken, so the DAGs of the others still load; an error
that no flow can be blamed for (a top-level key, say) still fails the whole file.
"""

from __future__ import annotations

from collections.abc import Mapping

from .problems import Problems


def blame_flows(problems: Problems, blamed: Mapping[int, tuple[str, str]], aliases: list[str]) -> dict[str, list[str]]:
    """Errors per flow they belong to, or {} when one error belongs to no flow (the file is broken).

    An error belongs to a flow when it was found while resolving that flow, or when its key is the
    flow's (``a->b.*``) or one of its clusters' (``a.*``: every flow of cluster ``a``).
    """
    known = set(aliases)
    order = {alias: i for i, alias in enumerate(aliases)}
    broken: dict[str, list[str]] = {}
    for problem in problems.errors:
        head = (problem.key or "").split(".", 1)[0]
        culprits: list[tuple[str, str]]
        if id(problem) in blamed:
            culprits = [blamed[id(problem)]]
        elif "->" in head:
            source, _, target = head.partition("->")
            culprits = [(source, target)] if {source, target} <= known and source != target else []
        elif head in known:
            culprits = [(head, other) for other in aliases if other != head]
            culprits += [(other, head) for other in aliases if other != head]
            culprits.sort(key=lambda p: (order[p[0]], order[p[1]]))
        else:
            culprits = []
        if not culprits:
            return {}
        for source, target in culprits:
            broken.setdefault(f"{source}->{target}", []).append(str(problem))
    return broken
