"""Role prompts of the drift → repair episode: one system prompt per role and the rendered user prompt.

The drift generator sees the task id, the target drift category, the library
versions and the working script; it answers a JSON breakage spec. The repair
agent sees the task id, the category, the versions, the broken script and its
error trace; it answers a unified diff against ``script.py``. Neither ever sees
the held-out inputs.

The layout is fixed so that a scripted player can read a prompt back
(``prompt_role``, ``prompt_task_id``, ``prompt_script``): each system prompt
starts with its role line, the user prompt has a ``Task: <id>`` line, and the
script is the prompt's first ```` ```python ```` block.
"""

from __future__ import annotations

import re

from durable_rollouts.contracts.drift_repair import SCRIPT_NAME, DriftTask, Role
from durable_rollouts.drift_repair.primitives import PRIMITIVES

DRIFT_ROLE_LINE = "You are the drift generator of a library-drift self-play game."
REPAIR_ROLE_LINE = "You are the repair agent of a library-drift self-play game."
_TASK_LINE = re.compile(r"^Task: (\S+)\s*$", re.MULTILINE)
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _primitive_table() -> str:
    rows = []
    for name, primitive in PRIMITIVES.items():
        fields = ", ".join(
            f"{field}{'' if info.is_required() else '?'}" for field, info in primitive.params_model.model_fields.items()
        )
        rows.append(f"- {name} (category {primitive.category}; params: {fields}): {primitive.summary}")
    return "\n".join(rows)


DRIFT_SYSTEM = f"""{DRIFT_ROLE_LINE}
Libraries change: functions get renamed, keyword arguments change, modules move, argument orders change,
attributes disappear. Your job is to simulate one such change on a working Python script so that the script
fails to run, in a way a careful engineer could repair from the error message alone.

Choose one primitive and its parameters (`?` marks an optional parameter):
{_primitive_table()}

Answer with exactly one JSON object and nothing else that looks like JSON:
{{"primitive_type": "<one of the names above>", "params": {{...}}}}
A breakage that does not make the script fail, or an answer that cannot be parsed or applied, earns nothing."""

REPAIR_SYSTEM = f"""{REPAIR_ROLE_LINE}
A working Python script broke because a library it uses changed (a renamed function, a changed keyword
argument, a moved module, reordered arguments or a changed attribute). You get the broken script and the
error it raises. Repair it so that it runs and prints exactly what it printed before the change.

Answer with a unified diff against `{SCRIPT_NAME}` in a ```diff block, with `--- a/{SCRIPT_NAME}` and
`+++ b/{SCRIPT_NAME}` headers and correct hunk headers. Change only what the repair needs."""


def _versions(task: DriftTask) -> str:
    return ", ".join(f"{name} {version}" for name, version in sorted(task.versions.items()))


def drift_prompt(task: DriftTask) -> str:
    return (
        f"Task: {task.task_id}\n"
        f"Target drift category: {task.category}\n"
        f"Library versions: {_versions(task)}\n\n"
        f"The script `{SCRIPT_NAME}` reads its input from stdin:\n"
        f"```python\n{task.script}```\n\n"
        "Propose one breakage as a JSON object."
    )


def repair_prompt(task: DriftTask, broken_script: str, error_trace: str) -> str:
    failure = (
        f"Running it on its input fails with:\n```text\n{error_trace.rstrip()}\n```"
        if error_trace.strip()
        else "Running it on its input raised no error."
    )
    return (
        f"Task: {task.task_id}\n"
        f"Drift category: {task.category}\n"
        f"Library versions: {_versions(task)}\n\n"
        f"The script `{SCRIPT_NAME}` after the library change:\n"
        f"```python\n{broken_script}```\n\n"
        f"{failure}\n\n"
        "Answer with the unified diff that repairs it."
    )


def role_messages(role: Role, user_prompt: str) -> list[dict[str, str]]:
    system = DRIFT_SYSTEM if role == "drift" else REPAIR_SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": user_prompt}]


def prompt_role(prompt: str) -> Role | None:
    if DRIFT_ROLE_LINE in prompt:
        return "drift"
    if REPAIR_ROLE_LINE in prompt:
        return "repair"
    return None


def prompt_task_id(prompt: str) -> str | None:
    found = _TASK_LINE.search(prompt)
    return found.group(1) if found else None


def prompt_script(prompt: str) -> str | None:
    found = _PYTHON_BLOCK.search(prompt)
    return found.group(1) if found else None
