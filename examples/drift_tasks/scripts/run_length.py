"""Run-length encode each line and check that decoding restores it."""
import itertools
import re
import sys


def encode(text: str) -> str:
    return "".join(f"{len(list(group))}{char}" for char, group in itertools.groupby(text))


def decode(encoded: str) -> str:
    return "".join(char * int(count) for count, char in re.findall(r"(\d+)(\D)", encoded))


for line in sys.stdin.read().splitlines():
    packed = encode(line)
    print(packed, decode(packed) == line)
