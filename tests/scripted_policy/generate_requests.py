"""Claude Code-like /generate requests for the scripted server's tests: a conversation, its prompt ids, the body."""

from __future__ import annotations

from durable_rollouts.policy.prompt_renderer import PromptRenderer

END_ID = 248046
TOOLS = [
    {"name": "Bash", "description": "Run a shell command", "input_schema": {"type": "object"}},
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
]
STATEMENT = "The frobnicator crashes on empty input.\nIt should return an empty list instead."


def system_message(cwd: str | None) -> dict:
    environment = f"# Environment\n - Primary working directory: {cwd}\n - Platform: linux" if cwd else "# Environment"
    return {"role": "system", "content": f"You are a coding agent.\n\n{environment}"}


def conversation(cwd: str | None, turns: int) -> list[dict]:
    """A Claude Code-like conversation with ``turns`` finished assistant turns (0, 1 or 2)."""
    read_path = f"{cwd}/PROBLEM_STATEMENT.md"
    numbered = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(STATEMENT.splitlines(), 1))
    history = [
        system_message(cwd),
        {"role": "user", "content": "Fix the issue described in PROBLEM_STATEMENT.md."},
        {
            "role": "assistant",
            "content": "Reading it.",
            "reasoning_content": "Read first.",
            "tool_calls": [{"function": {"name": "Read", "arguments": {"file_path": read_path}}}],
        },
        {"role": "tool", "content": numbered},
        {
            "role": "assistant",
            "content": "Applying.",
            "tool_calls": [{"function": {"name": "Bash", "arguments": {"command": "git apply ..."}}}],
        },
        {"role": "tool", "content": "(no output)"},
    ]
    return history[: 2 + 2 * turns]


def prompt_ids(renderer: PromptRenderer, messages: list[dict]) -> list[int]:
    return renderer.encode(renderer.render(messages, TOOLS, add_generation_prompt=True))


def generate_body(input_ids: list[int], rid: str, max_new_tokens: int = 4096) -> dict:
    return {
        "input_ids": input_ids,
        "sampling_params": {
            "max_new_tokens": max_new_tokens,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "stop_token_ids": [END_ID],
            "skip_special_tokens": False,
            "no_stop_trim": True,
        },
        "return_logprob": True,
        "rid": rid,
        "stream": False,
    }
