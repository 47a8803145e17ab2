"""Hexadecimal tokens to decimal and binary."""
import sys

for token in sys.stdin.read().split():
    value = int(token, 16)
    print(token, "->", value, format(value, "b"))
