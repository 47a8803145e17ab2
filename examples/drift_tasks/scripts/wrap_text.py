"""Normalise whitespace, title-case the text, and wrap it at 24 columns."""
import sys
import textwrap

text = " ".join(sys.stdin.read().split())
print(text.title())
print(textwrap.fill(text, width=24))
