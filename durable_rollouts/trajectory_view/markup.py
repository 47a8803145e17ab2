"""What every page shares: escaping, the page around a body (inline style, hover tip, token data, script) and word
counts.

Invariants: every text from a rollout reaches a page through ``esc``; the token data is JSON in which no ``<``
appears (written ``\\u003c``), so no text inside it can close or open a script element, and no NaN or infinity
(they are ``null``), which ``JSON.parse`` refuses.
"""

from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path

ASSETS = Path(__file__).parent


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@cache
def _asset(name: str) -> str:
    """A page asset's text, read once per process (a report writes many pages)."""
    return (ASSETS / name).read_text()


def page(title: str, body: str, data: dict | None = None) -> str:
    """A whole page around ``body``: inline style, the hover tip, and with ``data`` the token data and the script."""
    script = ""
    if data is not None:
        encoded = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
        script = (
            f'<script type="application/json" id="token-data">{encoded}</script><script>{_asset("page.js")}</script>'
        )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_asset('page.css')}</style></head>"
        f'<body class="shade-lp">{body}<div id="tip"></div>{script}</body></html>'
    )
