"""URL slugs."""

import re
import unicodedata

_NOT_ALLOWED = re.compile(r"[^a-z0-9]")


def slugify(text, separator="-"):
    """Lower-case ASCII slug of ``text``.

    Accents are stripped; every run of characters other than ``a-z`` and
    ``0-9`` becomes a single ``separator``; the slug never starts or ends with
    the separator.
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_ALLOWED.sub(separator, ascii_text.lower())
