"""Count log lines per level; report the time span and the longest message."""
import re
import sys
from collections import Counter

LINE = re.compile(r"^(?P<time>\d\d:\d\d:\d\d) (?P<level>[A-Z]+) (?P<message>.*)$")


def parse(lines: list[str]) -> list[re.Match]:
    return [match for match in map(LINE.match, lines) if match]


entries = parse(sys.stdin.read().splitlines())
levels = Counter(match.group("level") for match in entries)
for level, count in sorted(levels.items()):
    print(f"{level}: {count}")
first, last = entries[0], entries[-1]
print("span:", first.group("time"), "->", last.group("time"))
print("longest:", max((match.group("message") for match in entries), key=len))
