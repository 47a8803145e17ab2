"""A rollout's time line: each activity its workflow scheduled, when it waited, ran and ended, and how (read off
the workflow's history by ``trainer_client.history_timeline``).

Invariants:

* one ``ActivitySpan`` per scheduled activity, in schedule order; ``started`` / ``ended`` are None while it has
  not (a span still open when the history ends is ``running``); ``attempt`` is the attempt that started last
  (a running activity's start is not in the history until it ends: a running workflow's pending activities
  give it, with their last failure);
* ``outcome`` is ``completed``, ``failed``, ``timed_out``, ``canceled`` or ``running``; ``failure`` the failure's
  message and its causes' (``message: cause``), one line, for every outcome but ``completed``;
* ``stage`` groups activities as the page draws them (``STAGES``: boot, agent, diff, grading, merge), ``other``
  for the rest (picking a host, clean-up); ``rollout_attempt`` is the workflow's attempt the activity belongs to (each
  attempt begins by picking a host: ``pick_host``), 1 for the first;
* ``summary`` is the summary the workflow gave the activity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

STAGES = {
    "boot_sandbox": "boot",
    "run_claude_code": "agent",
    "capture_diff": "diff",
    "evaluate": "grading",
    "merge_segments": "merge",
}


@dataclass
class ActivitySpan:
    activity: str
    summary: str
    scheduled: datetime
    started: datetime | None = None
    ended: datetime | None = None
    attempt: int = 0
    outcome: str = "running"
    failure: str = ""
    rollout_attempt: int = 1
    activity_id: str = ""

    @property
    def stage(self) -> str:
        return STAGES.get(self.activity, "other")


@dataclass
class Timeline:
    """``ended``: when the workflow closed; ``observed``: when a running one was read (its open bars end there)."""

    started: datetime | None = None
    ended: datetime | None = None
    spans: list[ActivitySpan] = field(default_factory=list)
    observed: datetime | None = None
