"""One named check of /app/stats.py; exit 0 when it holds."""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, "/app")

from stats import mean, median  # noqa: E402

TOLERANCE = float(os.environ.get("STATS_TOLERANCE", "0"))
CHECKS = {
    "odd": lambda: median([3, 1, 2]) == 2,
    "even": lambda: abs(median([1, 2, 3, 4]) - 2.5) <= TOLERANCE,
    "unsorted": lambda: abs(median([10, 1, 7, 4]) - 5.5) <= TOLERANCE,
    "mean": lambda: mean([1, 2, 3, 4]) == 2.5,
}

name = sys.argv[1]
ok = CHECKS[name]()
print(f"{name}: {'ok' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
