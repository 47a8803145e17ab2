"""ISO dates to weekday name and day of the year."""
import sys
from datetime import date

for token in sys.stdin.read().split():
    year, month, day = map(int, token.split("-"))
    when = date(year, month, day)
    print(when.isoformat(), when.strftime("%A"), when.timetuple().tm_yday)
