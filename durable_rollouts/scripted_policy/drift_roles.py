"""Scripted players for the drift → repair roles, for the scripted policy server (offline episodes).

Each reads only the decoded prompt (``durable_rollouts.drift_repair.prompts`` fixes its
layout) and answers like a model would, reasoning first:

* ``drift``: the seeded baseline's spec for the script in the prompt, seeded
  by the task id, as a fenced JSON object;
* ``repair``: the oracle diff from the broken script in the prompt back to
  the corpus's original for the prompt's task id, in a ``diff`` fence;
* ``self_play``: whichever of the two the prompt's role asks for.

A prompt they cannot read (no script, unknown task, no role) gets a plain
sentence, which the episode then handles as an unusable answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import get_args

from durable_rollouts.contracts.drift_repair import DriftCategory, DriftTask
from durable_rollouts.drift_repair.baselines import baseline_drift, oracle_repair
from durable_rollouts.drift_repair.primitives import DriftSpecError
from durable_rollouts.drift_repair.prompts import prompt_role, prompt_script, prompt_task_id

Corpus = Callable[[], dict[str, DriftTask]]


def _answer(reasoning: str, text: str) -> str:
    return f"<think>\n{reasoning}\n</think>\n\n{text}"


def drift_completion(prompt: str, max_new_tokens: int) -> str:
    script, task_id = prompt_script(prompt), prompt_task_id(prompt)
    if script is None or task_id is None:
        return _answer("I cannot find the script.", "There is no script to break.")
    category = next((c for c in get_args(DriftCategory) if f"Target drift category: {c}\n" in prompt), None)
    try:
        spec = baseline_drift(script, task_id, category)
    except DriftSpecError:
        return _answer("Nothing in this script can drift.", "I have no breakage to propose.")
    body = json.dumps(spec.model_dump(), indent=2)
    return _answer(f"A {spec.primitive_type} change will make this script fail.", f"```json\n{body}\n```")


class RepairCompletion:
    """The oracle diff for the prompt's task; the corpus is read on first use."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def __call__(self, prompt: str, max_new_tokens: int) -> str:
        broken, task_id = prompt_script(prompt), prompt_task_id(prompt)
        task = self.corpus().get(task_id or "")
        if broken is None or task is None:
            return _answer("I do not recognise this task.", "I cannot repair this script.")
        diff = oracle_repair(broken, task.script)
        return _answer(
            "The error points at the changed call; restoring it.", f"Here is the fix:\n\n```diff\n{diff}```\n"
        )


class SelfPlayCompletion:
    """Plays the drift or the repair role, as the prompt asks."""

    def __init__(self, corpus: Corpus):
        self.repair = RepairCompletion(corpus)

    def __call__(self, prompt: str, max_new_tokens: int) -> str:
        role = prompt_role(prompt)
        if role == "drift":
            return drift_completion(prompt, max_new_tokens)
        if role == "repair":
            return self.repair(prompt, max_new_tokens)
        return _answer("This is not a drift or repair prompt.", "I have nothing to say.")
