"""The agent's stream-json log as it travels in the rollout's result: whole up to ``LOG_LIMIT_BYTES``, else its head
and its end with a ``rollout_log_cut`` line between them, never cut silently."""

from __future__ import annotations

import json

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.git_workspace import AGENT_LOG
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

# At most this much, so a rollout's result stays well under the payload cap (``ROLLOUT_PAYLOAD_MAX_BYTES``) with the
# grading log and the trajectory beside it.
LOG_LIMIT_BYTES = 8 * 1024 * 1024
# Of a log over the limit, the end kept after its head (the ``result`` line the verdict reads is last).
LOG_END_BYTES = 1024 * 1024


def cut_log(head: bytes, end: bytes, limit: int) -> bytes:
    """A stream-json log longer than ``limit``, from its first ``limit + 1`` bytes and its last ``len(end)``:
    whole lines of the head, a ``rollout_log_cut`` line saying what is kept, whole lines of the end; at most
    ``limit`` bytes plus that line."""
    kept = head[: max(limit - len(end), 0)]
    kept = kept[: kept.rfind(b"\n") + 1]
    end = end[end.find(b"\n") + 1 :]
    marker = json.dumps({"type": "rollout_log_cut", "kept_head_bytes": len(kept), "kept_end_bytes": len(end)})
    return kept + marker.encode() + b"\n" + end


async def read_agent_log(sandboxes: DockerSandboxes, handle: SandboxHandle) -> bytes:
    """The agent's log from its sandbox, cut as the module says; empty when no agent started (the runner creates the
    file as it starts)."""
    try:
        head = await sandboxes.read_file(handle, AGENT_LOG, LOG_LIMIT_BYTES + 1)
    except FileNotFoundError:
        return b""
    if len(head) <= LOG_LIMIT_BYTES:
        return head
    end = await sandboxes.read_file(handle, AGENT_LOG, LOG_END_BYTES, tail=True)
    return cut_log(head, end, LOG_LIMIT_BYTES)


def decoded(log: bytes) -> tuple[str, list[str]]:
    """An agent log as text and lines (run it in a thread: up to ``LOG_LIMIT_BYTES``)."""
    text = log.decode(errors="replace")
    return text, text.splitlines()
