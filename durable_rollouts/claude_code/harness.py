"""How Claude Code is launched for a rollout, and how its run is judged.

The CLI runs headless (``-p``) with ``bypassPermissions`` and ``stream-json`` output; its stdout is the trajectory
log. Its environment points it at this worker's adapter with the attempt's session secret and keeps it off the
network and its prompt stable; the reason for each variable is at the line that sets it.

Invariants:
* ``CLAUDE_CODE_MAX_CONTEXT_TOKENS`` is the session's context budget (never below ``CLI_MIN_WINDOW``), so the CLI's
  auto-compaction fires before the adapter's budget is exhausted;
* a run is judged by the exit code and the **last** ``result`` line's ``is_error`` / ``terminal_reason``, never by
  ``subtype`` (API errors still say ``success``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, Field

SWE_PROMPT = (
    "You are working in a git repository. The task is described in PROBLEM_STATEMENT.md "
    "in the current directory. Read it, find the cause in the code, and change the source so "
    "that the problem is fixed. Do not modify or delete PROBLEM_STATEMENT.md and do not commit. "
    "Keep the change minimal; when you are done, stop."
)
DEFAULT_TOOLS = "Bash,Read,Edit,Write"
CLI_MIN_WINDOW = 65536
MODEL_NAME = "slime-actor"
STATIC_ENV = {
    "ANTHROPIC_MODEL": MODEL_NAME,  # a name the CLI does not recognise keeps its prompt generic
    # These three keep it off the network and the prompt stable.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
    "DISABLE_AUTOUPDATER": "1",
    "IS_SANDBOX": "1",
}


class ClaudeCodeSettings(BaseModel):
    """Knobs of the agent process; ``extra_args`` / ``extra_env`` mirror SLIME_AGENT_CC_EXTRA_ARGS / _EXTRA_ENVS."""

    prompt: str = SWE_PROMPT
    tools: str = DEFAULT_TOOLS
    max_turns: int = Field(100, ge=1)
    max_retries: int = Field(10, ge=0)
    api_timeout_ms: int = Field(600_000, ge=1000)
    extra_args: list[str] = []
    extra_env: dict[str, str] = {}


class AgentVerdict(BaseModel):
    exit_code: int
    is_error: bool
    terminal_reason: str
    num_turns: int
    result_text: str
    reason: str


def claude_code_argv(binary: str, settings: ClaudeCodeSettings) -> list[str]:
    return [
        binary,
        "-p",
        settings.prompt,
        "--permission-mode",
        "bypassPermissions",
        "--output-format",
        "stream-json",
        "--verbose",
        "--tools",
        settings.tools,
        "--max-turns",
        str(settings.max_turns),
        *settings.extra_args,
    ]


def claude_code_env(
    base_url: str, token: str, home: str, context_budget: int, settings: ClaudeCodeSettings
) -> dict[str, str]:
    return {
        **STATIC_ENV,
        "ANTHROPIC_BASE_URL": base_url,  # this worker's adapter
        "ANTHROPIC_AUTH_TOKEN": token,  # the attempt's session secret
        "HOME": home,
        # The CLI refuses to send anything at about W - 23K tokens of its window W (``blocking_limit``), so a small
        # model's window (SmolLM2's 8K) is told to it as 64K and the adapter's budget is the real bound: a turn that
        # does not fit ends with ``max_tokens``, nothing sampled.
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(max(context_budget, CLI_MIN_WINDOW)),
        # Its backoff ladder (~180 s at 10 retries) is the window in which a restarted worker can take the session back.
        "CLAUDE_CODE_MAX_RETRIES": str(settings.max_retries),
        # Bounds the wait for response headers, which the adapter sends within its keep-alive interval on streams.
        "API_TIMEOUT_MS": str(settings.api_timeout_ms),
        **settings.extra_env,
    }


def judge_run(stdout_lines: Iterable[str], exit_code: int) -> AgentVerdict:
    """Verdict from the last ``result`` line of the stream-json log and the exit code."""
    result: dict | None = None
    for line in stdout_lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("type") == "result":
            result = event
    if result is None:
        reason = "agent_killed" if exit_code < 0 or exit_code >= 128 else "agent_no_result"
        return AgentVerdict(
            exit_code=exit_code, is_error=True, terminal_reason="", num_turns=0, result_text="", reason=reason
        )
    is_error = bool(result.get("is_error")) or exit_code != 0
    terminal = str(result.get("terminal_reason") or "")
    return AgentVerdict(
        exit_code=exit_code,
        is_error=is_error,
        terminal_reason=terminal,
        num_turns=int(result.get("num_turns") or 0),
        result_text=str(result.get("result") or "")[:2000],
        reason=f"agent_error:{terminal or 'unknown'}" if is_error else "completed",
    )
