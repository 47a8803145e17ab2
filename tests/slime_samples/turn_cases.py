"""Turn sequences for slime's trajectory rule, and the project's samples of them
(``durable_rollouts.slime_samples.message_tree``).

Shared by the stand-in tests (``test_message_tree.py``: the expected samples) and the check against a real
slime checkout (``tests/against_slime``: slime's ``TrajectoryManager`` must give the same samples).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from durable_rollouts.policy.token_capture import message_key
from durable_rollouts.slime_samples.message_tree import MessageTree, Turn

SYSTEM = {"role": "system", "content": "You are a coding agent."}
TASK = {"role": "user", "content": "Fix the bug."}


def reply(text: str, tool: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool:
        message["tool_calls"] = [{"type": "function", "function": {"name": "Bash", "arguments": {"command": text}}}]
    return message


def tool_result(text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text}


@dataclass
class CaseTurn:
    prompt: list[dict[str, Any]]
    reply: dict[str, Any]
    prompt_ids: list[int]
    output_ids: list[int]
    finish_reason: str = "stop"
    ill_formed: bool = False
    log_probs: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.log_probs:
            self.log_probs = [-((sum(self.prompt_ids) + i) % 97 + 1) / 100 for i in range(len(self.output_ids))]


def project_turn(turn: CaseTurn, index: int = 0) -> Turn:
    n = len(turn.output_ids)
    return Turn(
        prompt_keys=[message_key(m) for m in turn.prompt],
        reply_key=message_key(turn.reply),
        prompt_ids=np.asarray(turn.prompt_ids, dtype=np.int32),
        output_ids=np.asarray(turn.output_ids, dtype=np.int32),
        output_mask=np.ones(n, dtype=np.uint8),
        output_log_probs=np.asarray(turn.log_probs, dtype=np.float64),
        output_versions=[None] * n,
        finish_reason=turn.finish_reason,
        called_tool=bool(turn.reply.get("tool_calls")),
        ill_formed=turn.ill_formed,
        segment=index,
    )


def project_samples(turns: list[CaseTurn], fork_threshold: int = 1024, max_tokens: int = 0) -> list[dict[str, Any]]:
    """The project's samples of ``turns``, as ``sample_view`` dicts."""
    tree = MessageTree(fork_threshold)
    for index, turn in enumerate(turns):
        tree.record(project_turn(turn, index))
    out = []
    for sequence in tree.sequences(max_tokens):
        start = sequence.response_start
        out.append(
            sample_view(
                sequence.tokens,
                len(sequence.loss_mask) - start,
                sequence.loss_mask[start:],
                sequence.log_probs[start:],
                {"truncated": sequence.truncated, "use_tool": sequence.use_tool, "ill_formed": sequence.ill_formed},
            )
        )
    return out


def sample_view(tokens, response_length, loss_mask, log_probs, metadata) -> dict[str, Any]:
    """What both sides must agree on, in plain Python values."""
    return {
        "tokens": [int(t) for t in tokens],
        "response_length": int(response_length),
        "loss_mask": [int(m) for m in loss_mask],
        "rollout_log_probs": [round(float(p), 9) for p in log_probs],
        "truncated": bool(metadata["truncated"]),
        "use_tool": bool(metadata["use_tool"]),
        "ill_formed": bool(metadata["ill_formed"]),
    }


def _two_turns(second_prompt_ids: list[int], second_output: list[int], **second) -> list[CaseTurn]:
    first = CaseTurn([SYSTEM, TASK], reply("ls", tool=True), [1, 2, 3], [10, 11])
    follow = [SYSTEM, TASK, first.reply, tool_result("a.py")]
    return [first, CaseTurn(follow, second.pop("reply", reply("done")), second_prompt_ids, second_output, **second)]


def _branches() -> list[CaseTurn]:
    first = CaseTurn([SYSTEM, TASK], reply("ls", tool=True), [1, 2, 3], [10, 11])
    left = CaseTurn([SYSTEM, TASK, first.reply, tool_result("a.py")], reply("left"), [1, 2, 3, 10, 11, 4], [20, 21])
    right = CaseTurn(
        [SYSTEM, TASK, first.reply, tool_result("b.py")], reply("right"), [1, 9, 3, 10, 11, 5], [30, 31, 32]
    )
    return [first, left, right]


def _rewrite(first_output: list[int]) -> list[CaseTurn]:
    first = CaseTurn([SYSTEM, TASK], reply("ls -la", tool=True), [1, 2, 3], first_output)
    echoed = reply("ls", tool=True)
    second = CaseTurn([SYSTEM, TASK, echoed, tool_result("a.py")], reply("done"), [1, 2, 3, 77, 4], [12, 13, 14])
    return [first, second]


# name -> (turns, fork_threshold, max_tokens, trained tokens per sample as slime gives them)
CASES: dict[str, tuple[list[CaseTurn], int, int, list[int]]] = {
    "clean": (_two_turns([1, 2, 3, 10, 11, 4, 5], [12, 13, 14]), 1024, 0, [5]),
    "realign_in_last_reply": (_two_turns([1, 2, 3, 10, 99, 4, 5], [12, 13, 14]), 1024, 0, [3]),
    "fork_when_the_new_reply_is_long": (_two_turns([1, 2, 3, 10, 99, 4, 5], [12, 13, 14, 15, 16]), 4, 0, [2, 5]),
    "fork_when_drift_is_before_the_last_reply": (_two_turns([1, 8, 3, 10, 11, 4, 5], [12, 13, 14]), 1024, 0, [2, 3]),
    "cut_to_max_tokens": (_two_turns([1, 2, 3, 10, 11, 4, 5], [12, 13, 14], finish_reason="length"), 1024, 8, [3]),
    "shared_reply_trained_once": (_branches(), 1024, 0, [4, 3]),
    "short_rewrite_merges": (_rewrite([10, 11]), 1024, 0, [3]),
    "long_rewrite_forks": (_rewrite([10, 11, 12, 13, 14]), 4, 0, [5, 3]),
    "ill_formed_and_tools": (
        _two_turns([1, 2, 3, 10, 11, 4], [12], ill_formed=True, reply=reply("x", tool=True)),
        1024,
        0,
        [3],
    ),
    "merge_off_at_threshold_zero": (_rewrite([10, 11]), 0, 0, [2, 3]),
}


def random_session(rng: random.Random, n_turns: int) -> list[CaseTurn]:
    """A random session: turns that extend, branch from, re-render or rewrite earlier ones, with token drift,
    short and long replies, cut-offs and tool calls."""
    turns: list[CaseTurn] = []
    vocabulary = list(range(1, 40))
    for _ in range(n_turns):
        if turns and rng.random() < 0.8:
            base = rng.choice(turns)
            messages = [*base.prompt, base.reply]
            ids = [*base.prompt_ids, *base.output_ids]
            if rng.random() < 0.2:
                cut = rng.randrange(1, len(messages))
                messages = messages[:cut]
                ids = ids[: rng.randrange(1, len(ids) + 1)]
            if rng.random() < 0.2 and messages[-1]["role"] == "assistant":
                messages = [*messages[:-1], reply(f"rewritten-{rng.randrange(3)}", tool=rng.random() < 0.5)]
            if rng.random() < 0.3 and ids:
                ids = list(ids)
                ids[rng.randrange(len(ids))] = rng.choice(vocabulary)
            messages = [*messages, tool_result(f"out-{rng.randrange(4)}")]
            ids = [*ids, *rng.choices(vocabulary, k=rng.randrange(1, 4))]
        else:
            messages = [rng.choice([SYSTEM, {"role": "system", "content": "Summarise."}]), TASK]
            ids = rng.choices(vocabulary, k=rng.randrange(1, 5))
        output = rng.choices(vocabulary, k=rng.choice([1, 2, 3, 6, 9]))
        finish = rng.choice(["stop", "stop", "length"])
        turns.append(
            CaseTurn(
                messages,
                reply(f"r{rng.randrange(5)}", tool=rng.random() < 0.5),
                ids,
                output,
                finish,
                rng.random() < 0.1,
            )
        )
    return turns
