"""Read the roles' answers: a JSON breakage spec (drift) and a unified diff (repair).

Both parsers take the visible text of a completion and never trust layout:

* ``parse_drift_spec`` looks in fenced blocks first (```` ```json ````, or any
  fence), then anywhere in the text, for the first JSON object carrying a
  string ``primitive_type`` (``params`` defaults to ``{}``); anything else
  raises ``SpecParseError`` with the reason (the workflow then falls back).
* ``extract_diff`` takes the first fenced block containing a hunk header, or
  else the text from the first diff line (``diff --git``, ``--- ``, ``@@``)
  on, and returns it re-rendered from its parsed hunks, so prose before,
  between or after the diff is dropped. No diff at all is ``""``, the empty
  patch. A diff that cannot be parsed is returned as found, so grading
  reports it as not applying.
"""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

from durable_rollouts.contracts.drift_repair import DriftSpec
from durable_rollouts.drift_repair.unified_diff import DiffError, parse_diff, render_diff

FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
DIFF_START = re.compile(r"^(diff --git |--- |@@ )", re.MULTILINE)


class SpecParseError(ValueError):
    pass


def _json_objects(text: str):
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def parse_drift_spec(text: str) -> DriftSpec:
    """The first JSON object with a string ``primitive_type`` (see the module docstring)."""
    fenced = [body for lang, body in FENCE.findall(text) if lang.lower() in ("json", "")]
    seen_object = False
    for region in [*fenced, text]:
        for value in _json_objects(region):
            seen_object = True
            if not isinstance(value.get("primitive_type"), str):
                continue
            try:
                return DriftSpec(primitive_type=value["primitive_type"], params=value.get("params") or {})
            except ValidationError as error:
                raise SpecParseError(f"spec: {error.errors()[0]['msg']}") from None
    if seen_object:
        raise SpecParseError("no JSON object with a string primitive_type")
    raise SpecParseError("no JSON object in the answer")


def extract_diff(text: str) -> str:
    """The unified diff in an answer (see the module docstring); ``""`` when there is none."""
    region = next((body for _, body in FENCE.findall(text) if re.search(r"^@@", body, re.MULTILINE)), None)
    if region is None:
        start = DIFF_START.search(text)
        if start is None:
            return ""
        region = text[start.start() :]
    try:
        hunks = parse_diff(region)
    except DiffError:
        return region
    return render_diff(hunks)
