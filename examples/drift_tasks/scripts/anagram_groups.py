"""Group words that are anagrams of each other; biggest groups first."""
import sys
from collections import defaultdict


def signature(word: str) -> str:
    return "".join(sorted(word.lower()))


groups = defaultdict(list)
for word in sys.stdin.read().split():
    groups[signature(word)].append(word)
ordered = sorted(groups.values(), key=lambda group: (-len(group), sorted(group)))
for group in ordered:
    print(" ".join(sorted(group, key=str.lower)))
