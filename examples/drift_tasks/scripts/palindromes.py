"""Say, per line, whether it is a palindrome ignoring case and punctuation."""
import re
import sys

for line in sys.stdin.read().splitlines():
    cleaned = re.sub(r"[^a-z0-9]", "", line.lower())
    verdict = "yes" if cleaned == cleaned[::-1] else "no"
    print(f"{line!r}: {verdict}")
