"""Split an arithmetic expression into number and operator tokens."""

import re

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(.))")


def tokenize(text):
    """Return a list of tokens: floats for numbers, one-character strings for operators."""
    tokens = []
    for number, op in _TOKEN.findall(text):
        if number:
            tokens.append(float(number))
        elif op.strip():
            if op not in "+-*/()":
                raise ValueError(f"unexpected character {op!r}")
            tokens.append(op)
    return tokens
