"""Baseline players: the seeded drift generator, the oracle repairer and the no-op repairer.

* ``baseline_drift(script, seed, category)`` enumerates every primitive's
  baseline candidates (see ``primitives``), keeps the target
  category's if it has any, shuffles them with ``random.Random(seed)`` and
  returns the first spec that actually mutates the script. Same script, seed
  and category give the same spec in any process.
* ``oracle_repair(broken, original)`` is the unified diff from the broken
  script back to the original (the upper bound);
* ``noop_repair()`` is the empty diff (the negative baseline).
"""

from __future__ import annotations

import random

from durable_rollouts.contracts.drift_repair import DriftCategory, DriftSpec
from durable_rollouts.drift_repair.primitives import PRIMITIVES, DriftSpecError, apply_spec, parse_script
from durable_rollouts.drift_repair.unified_diff import make_diff


def candidate_specs(script: str, rng: random.Random) -> list[tuple[DriftCategory, DriftSpec]]:
    tree = parse_script(script)
    return [
        (primitive.category, DriftSpec(primitive_type=name, params=params))
        for name, primitive in PRIMITIVES.items()
        for params in primitive.candidates(tree, rng)
    ]


def baseline_categories(script: str) -> set[DriftCategory]:
    """The categories the baseline can break this script in."""
    return {category for category, _ in candidate_specs(script, random.Random(0))}


def baseline_drift(script: str, seed: int | str, category: DriftCategory | None = None) -> DriftSpec:
    rng = random.Random(f"baseline-drift:{seed}")
    candidates = candidate_specs(script, rng)
    preferred = [spec for c, spec in candidates if c == category] or [spec for _, spec in candidates]
    rng.shuffle(preferred)
    for spec in preferred:
        try:
            apply_spec(script, spec)
        except DriftSpecError:
            continue
        return spec
    raise DriftSpecError("no primitive mutates this script")


def oracle_repair(broken: str, original: str) -> str:
    return make_diff(broken, original)


def noop_repair() -> str:
    return ""
