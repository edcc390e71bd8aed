"""Routing colours: how many a program's collectives configure on a router, and a plan that fits the limit.

Every collective runs on a route configured in the routers it crosses, one colour per tree level (collectives.py);
a router holds `spec.routes_per_tile` colours (24 [SDK]). The device counts the pattern-levels it configured
(each distinct (kind, span) pattern, summed as if every pattern crossed every router: pessimistic). A program that
needs more colours than a router has cannot be loaded as it is, so the device refuses it (`check_routes`) and
`fit_routes` finds a plan that fits: a pattern runs on the pattern of a longer span of the same kind (its line's
extra tiles pass nothing), merging the pair whose span grows least, until the colours fit. A merged collective is
charged as its longer span, so the plan costs time, never numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

Pattern = tuple[str, int]


class WaferRoutingError(ValueError):
    """The collectives need more routing colours than a router holds, and no merging of patterns fits them."""


def colours(routes: Mapping[Pattern, int]) -> int:
    """Colours per router the patterns configure (one per tree level of each distinct pattern)."""
    return sum(routes.values())


def describe(routes: Mapping[Pattern, int]) -> str:
    return ", ".join(f"{kind} {span} ({levels})" for (kind, span), levels in sorted(routes.items()))


def fit_routes(routes: Mapping[Pattern, int], limit: int) -> tuple[tuple[str, int, int], ...]:
    """The merges (kind, span, onto span) after which the patterns need at most `limit` colours, fewest first:
    each step merges, within one kind, a pattern onto the next longer one, taking the pair with the smallest
    ratio of spans. Raises WaferRoutingError when even one pattern per kind does not fit."""
    live = dict(routes)
    merges: dict[Pattern, int] = {}
    while colours(live) > limit:
        pairs = []
        for kind in {k for k, _ in live}:
            spans = sorted(s for k, s in live if k == kind)
            pairs += [(b / a, kind, a, b) for a, b in itertools.pairwise(spans)]
        if not pairs:
            raise WaferRoutingError(
                f"the collectives need {colours(live)} routing colours per router even with one pattern per kind "
                f"({describe(live)}), more than the {limit} a router holds"
            )
        _, kind, small, large = min(pairs)
        live[(kind, large)] = max(live[(kind, large)], live.pop((kind, small)))
        for pattern, onto in merges.items():  # earlier merges onto `small` now run on `large`
            if pattern[0] == kind and onto == small:
                merges[pattern] = large
        merges[(kind, small)] = large
    return tuple(sorted((kind, span, onto) for (kind, span), onto in merges.items()))
