"""Count words: the three most common (ties alphabetical) and the total."""
import sys
from collections import Counter

text = sys.stdin.read().lower()
words = text.split()
counts = Counter(words)
ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
for word, n in ranked[:3]:
    print(f"{word}: {n}")
print("total", len(words))
