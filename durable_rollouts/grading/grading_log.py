"""What every grader shares about its log and its result: the tail's size, the whole log's cap, how a
sandbox file is read into the log, and when a patch counts as applied.

Invariants:

* ``log_tail`` holds at most ``LOG_TAIL_BYTES`` of UTF-8; the whole grading log at most ``FULL_LOG_BYTES``,
  keeping its end, and a cut is said in the log itself, never silently.
* A patch is applied cleanly iff a rung of the apply ladder applied it: neither "" (no rung did) nor
  "empty" (there was nothing to apply).
"""

from __future__ import annotations

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

LOG_TAIL_BYTES = 4096
# The whole log travels in the grading's result, so it stays well under the payload cap.
FULL_LOG_BYTES = 8 << 20
NOT_APPLIED = ("", "empty")


def last_bytes(text: str, limit: int) -> str:
    """The text of the last ``limit`` bytes of ``text`` (UTF-8)."""
    return text.encode()[-limit:].decode("utf-8", errors="replace") if limit > 0 else ""


def log_tail(output: str, note: str = "") -> str:
    """A result's ``log_tail``: the end of ``output`` and then the whole of ``note``, within ``LOG_TAIL_BYTES``."""
    return last_bytes(output, LOG_TAIL_BYTES - len(note.encode())) + note


def applied_cleanly(method: str) -> bool:
    return method not in NOT_APPLIED


async def read_log(sandboxes: DockerSandboxes, handle: SandboxHandle, path: str, limit: int = FULL_LOG_BYTES) -> str:
    """The file's text ("" if missing); past ``limit`` bytes its end, after a line saying it was cut."""
    try:
        data = await sandboxes.read_file(handle, path, limit + 1, tail=True)
    except (FileNotFoundError, IsADirectoryError):
        return ""
    cut = f"[{path} cut: only its last {limit:,} bytes are kept]\n" if len(data) > limit else ""
    return cut + data[-limit:].decode("utf-8", errors="replace")
