"""Monthly calendar summary: weekday of the 1st, number of days, weekend days and a compact grid."""
import calendar
import sys


def weekend_days(year: int, month: int) -> int:
    grid = calendar.Calendar(firstweekday=calendar.MONDAY).monthdayscalendar(year, month)
    return sum(1 for week in grid for day in week[5:] if day)


def compact_grid(year: int, month: int) -> str:
    weeks = calendar.Calendar(firstweekday=calendar.MONDAY).monthdayscalendar(year, month)
    return "\n".join(" ".join(f"{day:2d}" if day else "  " for day in week) for week in weeks)


for token in sys.stdin.read().split():
    year, month = (int(part) for part in token.split("-"))
    first_weekday, days = calendar.monthrange(year, month)
    print(f"{calendar.month_name[month]} {year}: starts {calendar.day_name[first_weekday]}, {days} days")
    print("weekend days:", weekend_days(year, month), "leap year:", calendar.isleap(year))
    print(compact_grid(year, month))
