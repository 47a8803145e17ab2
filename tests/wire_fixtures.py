"""Real Claude Code 2.1.328 request captures, kept in the repository under tests/fixtures/claude_code_wire/."""

import json
from pathlib import Path

WIRE_DIR = Path(__file__).resolve().parent / "fixtures" / "claude_code_wire"


def captured(name: str) -> tuple[dict, dict]:
    """(headers, body) of a captured request; plain-body captures get the turn-1 headers."""
    data = json.loads((WIRE_DIR / name).read_text())
    if "body" in data:
        return data["headers"], data["body"]
    return json.loads((WIRE_DIR / "turn1_headers.json").read_text()), data
