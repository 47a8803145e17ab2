"""What every page shares: escaping, the page around a body (inline style, hover tip, token data, script), word
counts and the order of weight versions.

Invariants: every text from a rollout reaches a page through ``esc``; the token data is JSON in which no ``<``
appears (written ``\\u003c``), so no text inside it can close or open a script element, and no NaN or infinity
(they are ``null``), which ``JSON.parse`` refuses.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from pathlib import Path

ASSETS = Path(__file__).parent


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def version_number(version: str) -> int | None:
    """An integer weight version's number; None for any other name."""
    return int(version) if version.lstrip("-").isdigit() else None


def ordered_versions(versions: Iterable[str]) -> list[str]:
    """Distinct versions: by number when every one is an integer, else in the order first seen."""
    seen = list(dict.fromkeys(versions))
    numbers = [version_number(v) for v in seen]
    return [v for _, v in sorted(zip(numbers, seen, strict=True))] if None not in numbers else seen


def page(title: str, body: str, data: dict | None = None) -> str:
    """A whole page around ``body``: inline style, the hover tip, and with ``data`` the token data and the script."""
    script = ""
    if data is not None:
        encoded = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
        script = f'<script type="application/json" id="token-data">{encoded}</script><script>{(ASSETS / "page.js").read_text()}</script>'
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{(ASSETS / 'page.css').read_text()}</style></head>"
        f'<body class="shade-lp">{body}<div id="tip"></div>{script}</body></html>'
    )
