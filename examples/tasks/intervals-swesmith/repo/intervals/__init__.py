"""Closed intervals of numbers."""

__all__ = ["merge"]


def merge(intervals):
    """The union of the closed intervals ``(start, end)``: sorted, disjoint, intervals that overlap or touch joined."""
    merged = []
    for start, end in sorted(intervals):
        if start > end:
            raise ValueError(f"interval ({start}, {end}) ends before it starts")
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
