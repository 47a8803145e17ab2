"""Who and what is where inside a sandbox container: the agent's account, the Claude Code mount, the labels."""

from __future__ import annotations

# The image every example task image is built FROM (scripts/build_base_image.sh); an image cache never removes it.
BASE_IMAGE = "rollout-base:bookworm"
LABEL_PREFIX = "io.rollouts"
# Labels a container with its owner (default: the host name), so a test run finds what it leaked.
OWNER_ENV = "ROLLOUT_SANDBOX_OWNER"
AGENT_USER = "agent"
AGENT_UID = 1000
AGENT_HOME = "/home/agent"
CLAUDE_MOUNT_ROOT = "/opt/claude"
CLAUDE_MOUNT_PATH = f"{CLAUDE_MOUNT_ROOT}/bin/claude"
CLAUDE_CONFIG = {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True}
SWEBENCH_TESTBED_BIN = "/opt/miniconda3/envs/testbed/bin"


def uid_of(user: str) -> int:
    return {"root": 0, AGENT_USER: AGENT_UID}.get(user, 0)
