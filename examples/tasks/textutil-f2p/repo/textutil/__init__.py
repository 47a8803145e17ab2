"""Small text helpers."""

from textutil.slug import slugify
from textutil.wrap import truncate_words

__all__ = ["slugify", "truncate_words"]
