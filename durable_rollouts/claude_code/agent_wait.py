"""Claude Code started detached in its sandbox and waited for within its time and disk budgets.

Invariants:

* the agent is waited for in slices of ``WAIT_SLICE_S`` (one ``docker exec`` each); the exec that waits the
  first slice also starts it (``DockerSandboxes.run_detached``), so a run that ends within one slice costs one
  exec;
* the agent starts only once the disk watch's first size is under the budget (a sandbox already over it
  starts none), so the watch never cancels a launch half done: after that size only the agent's own writes
  move the usage, and the launch records the agent's process group as it starts it;
* a disk budget passed is checked once more after the agent exits, so the mark does not depend on when the
  watch sampled.
"""

from __future__ import annotations

import shlex
import time
from typing import NamedTuple

from durable_rollouts.claude_code.harness import ClaudeCodeSettings, claude_code_argv, claude_code_env
from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.container_layout import AGENT_HOME, CLAUDE_MOUNT_PATH
from durable_rollouts.docker_sandbox.disk_watch import DiskWatch
from durable_rollouts.docker_sandbox.git_workspace import AGENT_JOB
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

WAIT_SLICE_S = 30.0


class AgentLaunch(NamedTuple):
    """Claude Code's command line and environment for one adapter session (the environment holds its secret)."""

    command: str
    env: dict[str, str]

    @classmethod
    def for_session(cls, claude: ClaudeCodeSettings, adapter_url: str, secret: str, context_budget: int) -> AgentLaunch:
        command = shlex.join(claude_code_argv(CLAUDE_MOUNT_PATH, claude))
        return cls(command, claude_code_env(adapter_url, secret, AGENT_HOME, context_budget, claude))


async def wait_for_agent(
    sandboxes: DockerSandboxes, handle: SandboxHandle, disk_bytes: int, launch: AgentLaunch | None, deadline: float
) -> tuple[int | None, str]:
    """The agent's exit code, or None when it must be stopped; and why it was or should have been: "",
    ``agent_budget_exceeded`` (``deadline``, a ``time.time()``, passed) or ``sandbox_disk_exceeded`` (the
    sandbox wrote past ``disk_bytes``; 0 is no budget). ``launch``: the agent to start; None when it already
    runs (a retry re-attaching)."""
    async with DiskWatch(sandboxes, handle, disk_bytes) as disk:
        if launch is not None and await disk.over_at_start():
            return None, "sandbox_disk_exceeded"
        while (left := deadline - time.time()) > 0:
            slice_s = min(WAIT_SLICE_S, left)
            if launch is not None:
                waiting = sandboxes.run_detached(
                    handle, AGENT_JOB, launch.command, slice_s, user="agent", env=launch.env
                )
                launch = None
            else:
                waiting = sandboxes.wait_detached(handle, AGENT_JOB, timeout_s=slice_s)
            exit_code = await disk.first(waiting)
            if exit_code is not None:
                return exit_code, "sandbox_disk_exceeded" if await disk.check() else ""
            if disk.exceeded:
                return None, "sandbox_disk_exceeded"
    return None, "agent_budget_exceeded"
