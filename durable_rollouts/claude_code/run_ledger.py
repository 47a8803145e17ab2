"""What the attempts of one agent run tell each other: how many were real failures and how many were interruptions.

The agent activity is retried by Temporal whatever ended its attempt, and a retry re-attaches to the same agent
when its session survived. An interruption (the worker killed or shut down, the server unreachable past the
heartbeat timeout) is not a failure: it never uses up the run's budget of failures.

Invariants:

* An attempt that fails for real records one more failure in its last heartbeat, just before it raises (Temporal
  hands those details to the next attempt). Every other end of an attempt is an interruption, so attempt ``n``
  knows the run was interrupted ``n - 1 - failures`` times, even by a kill that came before its first heartbeat.
* A run gives up for good once ``MAX_AGENT_FAILURES`` real failures are spent (``exhausted``); interruptions are
  bounded by the agent's own deadline, the host's resume window and the rollout's wall-clock guard, not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_AGENT_FAILURES = 3


@dataclass(frozen=True)
class RunLedger:
    """Real failures and interruptions of one agent run so far."""

    failures: int = 0
    interruptions: int = 0

    @classmethod
    def after(cls, details: Any, attempt: int) -> RunLedger:
        """The ledger at the start of attempt ``attempt``, from the last heartbeat ``details`` the attempts before
        left."""
        failures = int(details.get("failures") or 0) if isinstance(details, dict) and attempt > 1 else 0
        return cls(failures, max(attempt - 1 - failures, 0))

    def failed(self) -> RunLedger:
        return RunLedger(self.failures + 1, self.interruptions)

    @property
    def exhausted(self) -> bool:
        return self.failures >= MAX_AGENT_FAILURES

    def details(self) -> dict[str, Any]:
        """The ledger as heartbeat details."""
        return {"failures": self.failures, "interruptions": self.interruptions}

    def failure_details(self) -> dict[str, Any]:
        """This ledger, one more failure recorded, as the last heartbeat of an attempt about to fail."""
        return self.failed().details()
