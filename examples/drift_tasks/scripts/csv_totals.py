"""Sum the amount column of a CSV per category."""
import csv
import io
import sys
from collections import defaultdict


def read_rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text), delimiter=","))


def totals_by(rows: list[dict], *, column: str) -> dict:
    sums = defaultdict(float)
    for row in rows:
        sums[row[column]] += float(row["amount"])
    return dict(sums)


rows = read_rows(sys.stdin.read())
for name, total in sorted(totals_by(rows, column="category").items()):
    print(f"{name:<10}{total:>10.2f}")
print("rows:", len(rows))
