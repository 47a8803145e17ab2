"""Print the lines in reverse order, each reversed, numbered with zero padding."""
import sys

lines = sys.stdin.read().splitlines()
for number, line in enumerate(reversed(lines), start=1):
    print(str(number).rjust(3, "0"), line[::-1])
