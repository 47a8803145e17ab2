"""Cutting tool calls out of the visible text: the one loop every tool-call format goes through.

A format finds its candidate calls as ``Block`` spans of the text (in order,
not overlapping) and says how to parse a block's payload. ``cut_calls`` then
keeps the package's invariant: a block whose payload parses becomes a call
and leaves the text; any other candidate stays in the text verbatim and is
reported as ``tool call <i>: <why>``, ``i`` counting candidates from 0.
Markup blocks (the markers of a section that groups calls) leave the text
without becoming a call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from durable_rollouts.policy.parsers.parsed import ParsedToolCall, Schemas, ToolCallFormatError, ToolCalls

PayloadParser = Callable[[str, Schemas], ParsedToolCall]


@dataclass(frozen=True)
class Block:
    """``text[start:end]``: a candidate call whose ``payload`` is parsed, unless ``problem`` already says why it
    cannot be one (kept and reported); or, with neither, markup around calls (cut, no call)."""

    start: int
    end: int
    payload: str | None = None
    problem: str | None = None


def cut_calls(text: str, blocks: Iterable[Block], parse: PayloadParser, schemas: Schemas) -> ToolCalls:
    calls: list[ParsedToolCall] = []
    errors: list[str] = []
    kept: list[str] = []
    cursor = 0
    candidate = 0
    for block in blocks:
        kept.append(text[cursor : block.start])
        cursor = block.end
        if block.payload is None and block.problem is None:
            continue
        try:
            if block.problem is not None:
                raise ToolCallFormatError(block.problem)
            assert block.payload is not None
            calls.append(parse(block.payload, schemas))
        except ToolCallFormatError as exc:
            errors.append(f"tool call {candidate}: {exc}")
            kept.append(text[block.start : block.end])
        candidate += 1
    kept.append(text[cursor:])
    return ToolCalls(calls=calls, errors=errors, text="".join(kept))


def delimited(text: str, opening: str, closing: str, start: int = 0, end: int | None = None) -> Iterator[Block]:
    """Each ``opening … closing`` in ``text[start:end]``, payload between the markers; an opening without its
    closing runs to ``end`` and is a candidate with the problem ``missing <closing>`` (a length cut-off)."""
    end = len(text) if end is None else end
    position = start
    while (found := text.find(opening, position, end)) != -1:
        inner = found + len(opening)
        close = text.find(closing, inner, end)
        if close == -1:
            yield Block(found, end, problem=f"missing {closing}")
            return
        position = close + len(closing)
        yield Block(found, position, payload=text[inner:close])


def sectioned(text: str, section: tuple[str, str], call: tuple[str, str]) -> Iterator[Block]:
    """Calls grouped in sections (``section`` = its opening and closing marker), each call delimited by ``call``.

    The section's markers are markup; its calls are candidates one by one, so a
    well-formed call survives an ill-formed sibling, and a section cut off by
    the length limit still yields the calls it completed (its missing closing
    marker is no error of its own). Text between calls stays in the text. A
    section holding no call at all is one candidate with a problem.
    """
    opening, closing = section
    position = 0
    while (found := text.find(opening, position)) != -1:
        inner = found + len(opening)
        close = text.find(closing, inner)
        end = len(text) if close == -1 else close
        position = end if close == -1 else close + len(closing)
        calls = list(delimited(text, *call, inner, end))
        if not calls:
            yield Block(found, position, problem=f"no {call[0]} in the tool-calls section")
            continue
        yield Block(found, inner)
        yield from calls
        if close != -1:
            yield Block(close, position)
