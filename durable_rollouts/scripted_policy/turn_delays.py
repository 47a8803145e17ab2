"""Per-turn delays for the scripted policy server: how long one answer takes, so rollouts can have a heavy tail.

A :data:`TurnDelay` is called once per ``/generate`` with the decoded prompt
the policy scripts its answer from and the request's routing key (the
adapter sends the session id, so each rollout attempt has its own key), and
returns the seconds that answer takes; the server spreads them over the
answer's tokens (``ScriptedPolicyServer``).

Invariants:

* both delays here are pure functions of their arguments and constructor
  parameters (``by_arrival`` aside): the same (prompt, key) always gets the
  same delay, in any process, in any order of calls;
* :class:`LogNormalSessionDelay` draws once per routing key: every turn of a
  session takes the same time, and that time is a log-normal draw
  determined by ``(seed, key)`` (with ``by_arrival``, by ``(seed, the order
  in which its session first asked)``);
* :class:`MarkedPromptDelay` looks only at the prompt: ``slow_s`` when it
  contains the marker, else ``fast_s``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

TurnDelay = Callable[[str, str | None], float]


@dataclass(frozen=True)
class LogNormalSessionDelay:
    """Each session's pace: ``lognormvariate(log(median_s), sigma)`` seeded by ``(seed, routing key)``, for every turn.

    A request without a routing key is one more session (the key ``None``).
    ``by_arrival``: seeded by ``(seed, n)`` for the n-th session this delay
    sees instead, so two runs with one seed face the same sequence of paces
    whatever their (random) session ids: a benchmark pairs its arms so.
    """

    median_s: float
    sigma: float
    seed: int = 0
    by_arrival: bool = False
    _arrivals: dict[str | None, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.median_s <= 0 or self.sigma < 0:
            raise ValueError(f"median_s must be > 0 and sigma >= 0, got median_s={self.median_s}, sigma={self.sigma}")

    def __call__(self, prompt: str, routing_key: str | None) -> float:
        key = self._arrivals.setdefault(routing_key, len(self._arrivals)) if self.by_arrival else routing_key
        return random.Random(f"{self.seed}:{key}").lognormvariate(math.log(self.median_s), self.sigma)


@dataclass(frozen=True)
class MarkedPromptDelay:
    """``slow_s`` for a prompt containing ``marker``, ``fast_s`` for any other.

    Put the marker into a task's problem statement to make that task's
    rollouts stragglers. In a coding-agent rollout the statement enters the
    prompt once the agent has read ``PROBLEM_STATEMENT.md``, so the first
    turn (which only names the file) is fast and every later one slow.
    """

    marker: str
    slow_s: float
    fast_s: float = 0.0

    def __call__(self, prompt: str, routing_key: str | None) -> float:
        return self.slow_s if self.marker in prompt else self.fast_s


def parse_lognormal(spec: str) -> LogNormalSessionDelay:
    """``MEDIAN,SIGMA[,SEED]`` (the server's ``--lognormal-turn-delay``) as a delay."""
    parts = spec.split(",")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected MEDIAN,SIGMA[,SEED], got {spec!r}")
    seed = int(parts[2]) if len(parts) == 3 else 0
    return LogNormalSessionDelay(float(parts[0]), float(parts[1]), seed)
