#!/usr/bin/env bash
# Harbor's oracle: rewrite median to average the two middle values of an even-length input.
set -e
cat >/app/stats.py <<'PY'
"""Summary statistics of a list of numbers."""


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
PY
