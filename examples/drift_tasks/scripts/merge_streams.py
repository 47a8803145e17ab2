"""Merge sorted, timestamped event streams and report gaps and per-source counts."""
import heapq
import sys
from collections import Counter
from itertools import groupby, pairwise
from operator import itemgetter


def parse_stream(line: str) -> list[tuple[int, str]]:
    source, _, rest = line.partition(":")
    return [(int(stamp), source.strip()) for stamp in rest.split()]


def largest_gap(events: list[tuple[int, str]]) -> tuple[int, int]:
    return max(pairwise(stamp for stamp, _ in events), key=lambda pair: (pair[1] - pair[0], -pair[0]))


streams = [parse_stream(line) for line in sys.stdin.read().strip().splitlines()]
merged = list(heapq.merge(*streams, key=itemgetter(0)))
print("order:", " ".join(f"{stamp}{source}" for stamp, source in merged))
print("per source:", dict(sorted(Counter(map(itemgetter(1), merged)).items())))
runs = [(source, len(list(group))) for source, group in groupby(merged, key=itemgetter(1))]
print("longest run:", max(runs, key=itemgetter(1)))
low, high = largest_gap(merged)
print(f"largest gap: {high - low} between {low} and {high}")
