"""A long agent trajectory as the adapter records it, for the page benchmark: a conversation rendered turn by
turn with the policy's chat template (the project's Qwen3.6 tokenizer), every reply's tokens sampled at a
log-prob drawn from a seeded model-like mix, the weight version rising every ``turns_per_version`` turns.

The content is the repository's own text: the system prompt is the docs (standing for Claude Code's system
prompt and tool definitions; ~20k tokens), each reply reasons over a paragraph of the docs and reads a source
file, whose text comes back as the tool result. The segment and its turn log obey the adapter's invariants
(each prompt extends the last turn's tokens; loss mask 1 exactly on the replies).
"""

from __future__ import annotations

import random
from pathlib import Path

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import SampledTurn, TokenSegment, TurnLog
from durable_rollouts.contracts.weight_versions import WeightVersionSpan
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.trajectory_packing import pack_trajectory

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Read a file from the local filesystem.",
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "required": ["file_path"],
            },
        },
    }
]


def _docs() -> list[str]:
    paragraphs = []
    for path in sorted((PROJECT_ROOT / "docs").glob("*.md")):
        paragraphs += [p.strip() for p in path.read_text().split("\n\n") if len(p.strip()) > 200]
    return paragraphs


def long_trajectory(
    renderer: PromptRenderer, target_tokens: int, seed: int = 0, turns_per_version: int = 8, file_chars: int = 3000
) -> RolloutResult:
    """A completed rollout's result whose one segment holds at least ``target_tokens`` tokens."""
    rng = random.Random(seed)
    paragraphs = _docs()
    sources = sorted((PROJECT_ROOT / "durable_rollouts").rglob("*.py"))
    system = "\n\n".join(paragraphs)[:60_000]
    messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": paragraphs[0]}]
    tokens: list[int] = []
    mask: list[int] = []
    log_probs: list[float] = []
    spans: list[WeightVersionSpan] = []
    turns: list[SampledTurn] = []
    keys = ["system:0", "user:0"]
    number = 0
    while len(tokens) < target_tokens:
        prompt_text = renderer.render(messages, TOOLS, add_generation_prompt=True)
        prompt = renderer.encode(prompt_text)
        if prompt[: len(tokens)] != tokens:
            raise AssertionError(f"turn {number}: the rendered prompt does not extend the trajectory")
        source: Path = sources[number % len(sources)]
        reply = {
            "role": "assistant",
            "reasoning_content": paragraphs[(number * 7 + 1) % len(paragraphs)][:700],
            "content": f"Reading {source.name} next.",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "Read", "arguments": {"file_path": str(source.relative_to(PROJECT_ROOT))}},
                }
            ],
        }
        whole = renderer.render([*messages, reply], TOOLS, add_generation_prompt=False)
        reply_text = whole[len(prompt_text) :].rstrip("\n")
        sampled = renderer.encode(reply_text)
        context = len(prompt) - len(tokens)
        tokens += prompt[len(tokens) :] + sampled
        mask += [0] * context + [1] * len(sampled)
        log_probs += [0.0] * context + [
            -(rng.expovariate(20.0) if rng.random() < 0.8 else rng.expovariate(0.8)) for _ in sampled
        ]
        version = str(1 + number // turns_per_version)
        if spans and spans[-1].version == version:
            spans[-1] = WeightVersionSpan(start=spans[-1].start, end=len(tokens), version=version)
        else:
            spans.append(WeightVersionSpan(start=len(tokens) - len(sampled), end=len(tokens), version=version))
        keys += [f"assistant:{number}", f"tool:{number}"]
        turns.append(
            SampledTurn(
                segment=0,
                prompt_end=len(prompt),
                end=len(tokens),
                finish_reason="stop",
                called_tool=True,
                prompt_messages=list(range(len(keys) - 2)),
                reply_message=len(keys) - 2,
            )
        )
        messages += [reply, {"role": "tool", "content": source.read_text()[:file_chars]}]
        number += 1
    prompt_length = turns[0].prompt_end
    segment = TokenSegment(
        kind="main",
        tokens=tokens,
        loss_mask=mask,
        rollout_log_probs=log_probs,
        prompt_length=prompt_length,
        turns=len(turns),
        finish_reason="stop",
        weight_version_spans=spans,
        tool_call_turns=len(turns),
    )
    return RolloutResult(
        workflow_id=f"rollout-bench-long-{target_tokens}-0-0",
        instance_id="long",
        sample_index=0,
        group_index=0,
        status="completed",
        reward=1.0,
        solved=True,
        applied_cleanly=True,
        attempts=1,
        turns=len(turns),
        trajectory=pack_trajectory([segment], TurnLog(turns=turns, message_keys=keys)),
    )
