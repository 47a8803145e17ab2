"""Per-city minimum, maximum and mean of "city, value" readings."""
import statistics
import sys
from collections import namedtuple

Reading = namedtuple("Reading", ["city", "value"])


def parse(line: str) -> Reading:
    city, value = line.rsplit(",", 1)
    return Reading(city.strip(), float(value))


readings = [parse(line) for line in sys.stdin.read().splitlines()]
by_city = {}
for reading in readings:
    by_city.setdefault(reading.city, []).append(reading.value)
for city in sorted(by_city):
    values = by_city[city]
    print(f"{city}: min={min(values)} max={max(values)} mean={statistics.fmean(values):.2f}")
print("overall stdev:", round(statistics.pstdev([r.value for r in readings]), 3))
