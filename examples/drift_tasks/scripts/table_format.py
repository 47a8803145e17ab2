"""Render pipe-separated rows as an aligned text table with a header rule."""
import sys
from itertools import zip_longest


def parse_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.strip().splitlines()]


def column_widths(rows: list[list[str]]) -> list[int]:
    return [max(len(cell) for cell in column) for column in zip_longest(*rows, fillvalue="")]


def render_row(cells: list[str], widths: list[int], *, align: str) -> str:
    padded = []
    for cell, width in zip_longest(cells, widths, fillvalue=""):
        padded.append(cell.rjust(width) if align == "right" else cell.ljust(width))
    return "| " + " | ".join(padded) + " |"


def render(rows: list[list[str]]) -> str:
    widths = column_widths(rows)
    lines = [render_row(rows[0], widths, align="left")]
    lines.append("|" + "+".join("-" * (width + 2) for width in widths) + "|")
    lines.extend(render_row(row, widths, align="right") for row in rows[1:])
    return "\n".join(lines)


rows = parse_rows(sys.stdin.read())
print(render(rows))
print(f"{len(rows) - 1} rows x {len(column_widths(rows))} columns")
