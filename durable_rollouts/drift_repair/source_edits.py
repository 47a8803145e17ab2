"""Position-exact text edits derived from AST nodes, so a transform changes only what it means to.

``ast.unparse`` would drop comments and reformat the whole script; instead a
transform finds nodes with ``ast`` and replaces their exact source spans.
Positions are the ``ast`` ones: 1-based lines and UTF-8 *byte* columns.

Invariants of ``apply_edits``: edits apply as if simultaneously (positions
refer to the original text); an edit lying inside an earlier-starting edit's
span is dropped (an outer rewrite wins over a nested one); partially
overlapping edits are a ``ValueError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

Position = tuple[int, int]


class Located(Protocol):
    """An ``ast`` node with a source span (expressions, statements, keywords, aliases, ...)."""

    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


@dataclass(frozen=True)
class SourceEdit:
    start: Position
    end: Position
    text: str


def node_span(node: Located) -> tuple[Position, Position]:
    assert node.end_lineno is not None and node.end_col_offset is not None, "a parsed node has its end position"
    return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)


def replace_node(node: Located, text: str) -> SourceEdit:
    start, end = node_span(node)
    return SourceEdit(start, end, text)


class SourceText:
    """A script's text with byte-offset lookups by ``ast`` position."""

    def __init__(self, source: str):
        self.source = source
        self.data = source.encode("utf-8")
        starts = [0]
        for line in self.data.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        self._line_starts = starts

    def offset(self, position: Position) -> int:
        line, column = position
        return self._line_starts[line - 1] + column

    def segment(self, start: Position, end: Position) -> str:
        return self.data[self.offset(start) : self.offset(end)].decode("utf-8")

    def node_text(self, node: Located) -> str:
        return self.segment(*node_span(node))


def apply_edits(text: SourceText, edits: list[SourceEdit]) -> str:
    spans = sorted(((text.offset(e.start), text.offset(e.end), e.text) for e in edits), key=lambda s: (s[0], -s[1]))
    kept: list[tuple[int, int, str]] = []
    for start, end, replacement in spans:
        if kept and start < kept[-1][1]:
            if end <= kept[-1][1]:
                continue
            raise ValueError(f"overlapping edits at bytes {start}..{end}")
        kept.append((start, end, replacement))
    out = bytearray(text.data)
    for start, end, replacement in reversed(kept):
        out[start:end] = replacement.encode("utf-8")
    return out.decode("utf-8")
