"""The Temporal client identity a rollout worker polls under, which says which host queue it serves and how
many agent slots it has: ``<pid>@<machine> host=<host queue> slots=<n>``. Pollers of the shared queue
(``describe_task_queue``) thereby name the fleet's hosts
(``durable_rollouts.trainer_client.rollout_queries.host_slots``)."""

from __future__ import annotations

import re
from typing import NamedTuple

_IDENTITY = re.compile(r"\S+ host=(?P<host_queue>\S+) slots=(?P<slots>\d+)")


class HostIdentity(NamedTuple):
    host_queue: str
    agent_slots: int


def worker_identity(pid: int, machine: str, host_queue: str, agent_slots: int) -> str:
    return f"{pid}@{machine} host={host_queue} slots={agent_slots}"


def parse_worker_identity(identity: str) -> HostIdentity | None:
    """The host queue and slots a rollout worker's identity names; None for any other poller's identity."""
    match = _IDENTITY.fullmatch(identity)
    return HostIdentity(match["host_queue"], int(match["slots"])) if match else None
