"""Image references as Docker reads them, and the mirror rewrite a fleet pulls through.

Invariants:

* ``canonical(name)`` is the fully qualified form Docker resolves a name to: a name without a registry is
  on ``docker.io``, a one-segment repository there is under ``library/``, and a name without a tag or
  digest is ``:latest``. Two names of the same image have the same canonical form.
* A ``MirrorRule`` matches on whole path segments of the canonical form (``docker.io/swebench`` matches
  ``docker.io/swebench/x:1`` but not ``docker.io/swebench2/x:1``); ``rewrite`` applies the first rule
  that matches and returns the name unchanged when none does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, field_validator

DEFAULT_REGISTRY = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^:[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")


class ImageReferenceError(ValueError):
    """A string that is not a Docker image reference."""


def _is_registry(segment: str) -> bool:
    return "." in segment or ":" in segment or segment == "localhost"


def split_reference(name: str) -> tuple[str, str, str]:
    """``(registry, repository, tag_or_digest)`` of ``name`` in canonical form; the last keeps its ``:`` or ``@``."""
    stripped = name.strip()
    first, _, rest = stripped.partition("/")
    registry, path = (first, rest) if rest and _is_registry(first) else (DEFAULT_REGISTRY, stripped)
    if registry == "index.docker.io":
        registry = DEFAULT_REGISTRY
    if "@" in path:
        repository, digest = path.split("@", 1)
        suffix = "@" + digest
    else:
        head, _, last = path.rpartition("/")
        repo_last, colon, tag = last.partition(":")
        repository = f"{head}/{repo_last}" if head else repo_last
        suffix = ":" + (tag if colon else "latest")
    if not registry or not _REPOSITORY.match(repository) or not (_TAG.match(suffix) or _DIGEST.match(suffix)):
        raise ImageReferenceError(f"not an image reference: {name!r}")
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = f"library/{repository}"
    return registry, repository, suffix


def canonical(name: str) -> str:
    registry, repository, suffix = split_reference(name)
    return f"{registry}/{repository}{suffix}"


def registry_of(name: str) -> str:
    """The registry host ``name`` is pulled from (``docker.io`` when it names none)."""
    return split_reference(name)[0]


class MirrorRule(BaseModel):
    """Pull what lies under ``source`` (a canonical prefix such as ``docker.io/swebench``) from ``target``
    (such as ``mirror.local:5000/swebench``)."""

    source: str
    target: str

    @field_validator("source", "target")
    @classmethod
    def _prefix(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"a mirror prefix is a registry path without spaces, got {value!r}")
        return value

    def applies_to(self, canonical_name: str) -> bool:
        return canonical_name.startswith(self.source + "/")

    def applied(self, canonical_name: str) -> str:
        return self.target + canonical_name[len(self.source) :]


def parse_mirror_rules(text: str) -> list[MirrorRule]:
    """``SOURCE=TARGET`` pairs separated by commas, e.g. ``docker.io/swebench=mirror.local:5000/swebench``."""
    rules = []
    for index, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        source, sep, target = part.partition("=")
        if not sep:
            raise ValueError(f"rule {index + 1} ({part!r}): expected SOURCE=TARGET")
        rules.append(MirrorRule(source=_canonical_prefix(source), target=target))
    return rules


def _canonical_prefix(prefix: str) -> str:
    """A prefix in the canonical form's spelling: ``swebench`` is ``docker.io/swebench``; a prefix that names
    a registry stays as written."""
    prefix = prefix.strip().rstrip("/")
    first = prefix.split("/", 1)[0]
    if _is_registry(first):
        return DEFAULT_REGISTRY + prefix[len(first) :] if first == "index.docker.io" else prefix
    return f"{DEFAULT_REGISTRY}/{prefix}"


def rewrite(name: str, rules: Sequence[MirrorRule]) -> str:
    """The name to pull ``name`` by: the first matching rule's rewrite of its canonical form, else ``name``."""
    if not rules:
        return name
    full = canonical(name)
    for rule in rules:
        if rule.applies_to(full):
            return rule.applied(full)
    return name
