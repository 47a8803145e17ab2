"""Turn titles into URL slugs."""

__version__ = "0.1.0"


def slugify(text: str, separator: str = "-") -> str:
    """Lower-case ``text`` and join its words with ``separator``."""
    words = text.lower().split(" ")
    return separator.join(words)
