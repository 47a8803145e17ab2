"""Summary statistics of whitespace-separated numbers."""
import statistics
import sys

numbers = [float(token) for token in sys.stdin.read().split()]
print("count:", len(numbers))
print("sum:", round(sum(numbers), 3))
print("mean:", round(statistics.mean(numbers), 3))
print("median:", statistics.median(numbers))
