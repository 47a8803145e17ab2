"""Shortening text for previews."""


def truncate_words(text, limit, ellipsis="..."):
    """The first ``limit`` words of ``text``, followed by ``ellipsis`` if words were dropped."""
    words = text.split()
    if len(words) <= limit:
        return " ".join(words)
    return " ".join(words[:limit]) + ellipsis
