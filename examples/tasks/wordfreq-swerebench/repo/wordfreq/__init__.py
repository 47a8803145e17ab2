"""The most frequent words of a text."""

import re
from collections import Counter

__all__ = ["top_words", "words"]


def words(text):
    """The words of ``text``, in order."""
    return re.findall(r"[A-Za-z']+", text)


def top_words(text, n=3):
    """The ``n`` most frequent words of ``text`` as ``(word, count)`` pairs, most frequent first."""
    return Counter(words(text)).most_common(n)
