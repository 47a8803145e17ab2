"""Weight versions as the engines report them: their order, and the spans of a segment's tokens each one sampled.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

_INTEGER = re.compile(r"-?[0-9]+")


def is_integer_version(version: str) -> bool:
    """Whether a weight version orders as an integer (``-?[0-9]+``), e.g. a trainer step."""
    return _INTEGER.fullmatch(version) is not None


def order_weight_versions(versions: Iterable[str]) -> list[str]:
    """The distinct versions, oldest first.

    Versions are strings on the wire (SGLang's ``weight_version``). When every
    one is an integer (``-?[0-9]+``) they are ordered as integers; otherwise by
    first appearance in ``versions``, which callers pass in token order.
    """
    distinct = list(dict.fromkeys(versions))
    if distinct and all(is_integer_version(v) for v in distinct):
        distinct.sort(key=int)
    return distinct


def collapse_runs(versions: Iterable[str]) -> list[str]:
    """``versions`` with each run of one version kept once (``a a b a`` -> ``a b a``)."""
    runs: list[str] = []
    for version in versions:
        if not runs or runs[-1] != version:
            runs.append(version)
    return runs


# One version's run over positions ``[start, end)`` (of a reply, then of a turn's tokens) as the policy path carries it:
# a plain tuple on the per-token path; ``WeightVersionSpan`` is its stored form in a segment (``spans_from_runs``).
VersionSpan = tuple[int, int, str]


class WeightVersionSpan(BaseModel):
    """Positions ``[start, end)`` of a segment whose sampled tokens were all sampled by weights ``version``.

    ``start`` and ``end - 1`` are sampled positions (loss_mask 1); the context
    tokens a span may enclose (a later turn's prompt, loss_mask 0) carry no
    version.
    """

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int
    version: str


def spans_from_runs(runs: Iterable[tuple[int, int, str | None]]) -> list[WeightVersionSpan]:
    """The canonical spans of sampled runs ``(start, end, version or None)``, given in position order.

    Every position of a run is sampled; runs of one version with only context
    (or nothing) between them become one span; a run without a version ends
    the span before it.
    """
    spans: list[WeightVersionSpan] = []
    broken = True
    for start, end, version in runs:
        if start >= end:
            continue
        if version is None:
            broken = True
        elif spans and not broken and spans[-1].version == version:
            spans[-1] = WeightVersionSpan(start=spans[-1].start, end=end, version=version)
        else:
            spans.append(WeightVersionSpan(start=start, end=end, version=version))
            broken = False
    return spans
