"""What the scripted policies answer: the oracle's three turns and the fixed fault completions.

Each completion is a function of the decoded prompt (and ``max_new_tokens``)
alone, text in the Qwen3-coder chat template's own form; the server encodes
it and appends the end-of-turn token.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence

from pydantic import BaseModel

ASSISTANT_TURN = "<|im_start|>assistant"
PROBLEM_STATEMENT_FILE = "PROBLEM_STATEMENT.md"
PATCH_DELIMITER = "ORACLE_PATCH"

_CWD_LINE = re.compile(r"Primary working directory: *([^\n<]*[^\s<])")
_READ_LINE_NUMBER = re.compile(r"(?m)^ *\d+(?:\t|→)")


class OracleTask(BaseModel):
    """A task the oracle can solve: ``match`` occurs in its problem statement, ``patch`` fixes it."""

    match: str
    patch: str


def final_answer(reasoning: str, text: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{text}"


def tool_call(reasoning: str, text: str, name: str, arguments: dict[str, str]) -> str:
    """A completion calling one tool, in Qwen3-coder XML exactly as the chat template renders it."""
    parameters = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
    return f"{final_answer(reasoning, text)}\n\n<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"


def noop_completion(prompt: str, max_new_tokens: int) -> str:
    return final_answer("There is nothing for me to do.", "I will not change anything.")


def malformed_completion(prompt: str, max_new_tokens: int) -> str:
    """A tool call whose body is neither the XML-function form nor JSON, and is never closed."""
    broken_call = '<tool_call>\n<function=Bash>\n{"command": "ls -la"\n'
    return f"{final_answer('I will list the files.', 'Listing the files.')}\n\n{broken_call}"


def length_completion(prompt: str, max_new_tokens: int) -> str:
    """At least ``max_new_tokens + 1`` tokens, so the end token never fits."""
    return "<think>\n" + "Still thinking. " * max_new_tokens


def completed_assistant_turns(prompt: str) -> int:
    """Assistant turns before the one being generated (the prompt ends with an open one)."""
    return max(prompt.count(ASSISTANT_TURN) - 1, 0)


def working_directory(prompt: str) -> str | None:
    found = _CWD_LINE.search(prompt)
    return found.group(1).strip() if found else None


def heredoc(patch: str) -> tuple[str, str]:
    """The patch with its trailing newline, and a delimiter that occurs nowhere in it."""
    body = patch if patch.endswith("\n") else patch + "\n"
    delimiter = PATCH_DELIMITER
    while delimiter in body:
        delimiter += "_"
    return body, delimiter


EXPLORE_COMMANDS = ("git status --short", "ls -la", "git log --oneline -3", "wc -l " + PROBLEM_STATEMENT_FILE)


class OraclePolicy:
    """Reads the problem statement, looks around for ``explore_turns`` turns, applies the matching task's patch,
    then finishes: ``explore_turns + 3`` assistant turns in all.

    The turn is the number of earlier assistant turns in the prompt. An exploring
    turn runs one read-only Bash command of ``EXPLORE_COMMANDS`` (in turn), so a
    long rollout changes nothing the patch depends on. A task matches when its
    ``match`` string occurs in the prompt, either as is or with the line numbers
    of Claude Code's ``Read`` output removed; the longest matching ``match`` wins.
    """

    def __init__(self, tasks: Sequence[OracleTask], explore_turns: int = 0):
        if explore_turns < 0:
            raise ValueError(f"explore_turns must be >= 0, got {explore_turns}")
        self.tasks = list(tasks)
        self.explore_turns = explore_turns

    def __call__(self, prompt: str, max_new_tokens: int) -> str:
        turn = completed_assistant_turns(prompt)
        cwd = working_directory(prompt)
        if turn == 0:
            return self._read_problem_statement(cwd)
        if turn <= self.explore_turns:
            return self._explore(turn - 1, cwd)
        if turn == self.explore_turns + 1:
            return self._apply_patch(prompt, cwd)
        return final_answer("The patch applied cleanly.", "The fix is applied.")

    @staticmethod
    def _explore(index: int, cwd: str | None) -> str:
        command = EXPLORE_COMMANDS[index % len(EXPLORE_COMMANDS)]
        if cwd:
            command = f"cd {shlex.quote(cwd)} && {command}"
        return tool_call(
            "I should look around before changing anything.", "Looking around.", "Bash", {"command": command}
        )

    def _read_problem_statement(self, cwd: str | None) -> str:
        reasoning = "I should read the problem statement first."
        text = "Reading the problem statement."
        if cwd is None:
            return tool_call(reasoning, text, "Bash", {"command": f"cat {PROBLEM_STATEMENT_FILE}"})
        return tool_call(reasoning, text, "Read", {"file_path": posixpath.join(cwd, PROBLEM_STATEMENT_FILE)})

    def _apply_patch(self, prompt: str, cwd: str | None) -> str:
        task = self.matching_task(prompt)
        if task is None:
            return final_answer("I do not recognise this problem.", "No known task matches this problem statement.")
        body, delimiter = heredoc(task.patch)
        apply = f"git apply --whitespace=nowarn <<'{delimiter}'\n{body}{delimiter}"
        command = f"cd {shlex.quote(cwd)} && {apply}" if cwd else apply
        return tool_call("I know the fix for this problem.", "Applying the fix.", "Bash", {"command": command})

    def matching_task(self, prompt: str) -> OracleTask | None:
        plain = _READ_LINE_NUMBER.sub("", prompt)
        matching = [task for task in self.tasks if task.match in prompt or task.match in plain]
        return max(matching, key=lambda task: len(task.match), default=None)
