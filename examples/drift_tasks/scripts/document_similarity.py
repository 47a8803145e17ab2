"""Cosine similarity between documents (one per line) over bag-of-words vectors."""
import math
import re
import sys
from collections import Counter
from itertools import combinations


class Vector:
    def __init__(self, counts: Counter):
        self.counts = counts
        self.norm = math.sqrt(sum(value * value for value in counts.values()))

    def dot(self, other: "Vector") -> int:
        return sum(count * other.counts[word] for word, count in self.counts.items())

    def cosine(self, other: "Vector") -> float:
        return self.dot(other) / (self.norm * other.norm)


def vectorize(document: str) -> Vector:
    return Vector(Counter(re.findall(r"[a-z]+", document.lower())))


documents = sys.stdin.read().strip().splitlines()
vectors = [vectorize(document) for document in documents]
pairs = sorted(
    ((round(vectors[i].cosine(vectors[j]), 4), i, j) for i, j in combinations(range(len(vectors)), 2)),
    key=lambda pair: (-pair[0], pair[1], pair[2]),
)
for score, i, j in pairs:
    print(f"doc{i} ~ doc{j}: {score:.4f}")
best = pairs[0]
print("most similar:", documents[best[1]][:20], "|", documents[best[2]][:20])
print("vocabulary:", len(set().union(*(vector.counts for vector in vectors))))
