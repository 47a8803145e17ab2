"""Conversations read off a session of real Claude Code requests (main, compaction, continuation, sub-agent)."""

import pytest

from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.trajectory_view.conversation import ContextMessage, Reply, conversations
from durable_rollouts.trajectory_view.token_text import TokenTexts
from tests.trajectory_view.captured_pages import captured_session


@pytest.mark.asyncio(loop_scope="session")
async def test_blocks_cover_every_token_once_with_roles_replies_and_parts(adapter, renderer):
    session = await captured_session(adapter, renderer)
    texts = TokenTexts.from_dir(ensure_qwen_tokenizer())
    read = conversations(session.segments, session.turn_log, texts)
    for conversation in read:
        ends = [0]
        for block in conversation.blocks:
            begins = block.lead_start if isinstance(block, Reply) else block.start
            assert begins == ends[-1], "blocks follow each other without gap or overlap"
            ends.append(block.end)
        assert ends[-1] == len(conversation.segment.tokens)
    assert [[r.number for r in c.replies] for c in read] == [[1], [2], [3], [4]], (
        "one reply per call, numbered in record order"
    )
    roles = [[b.role for b in c.blocks if isinstance(b, ContextMessage)] for c in read]
    assert roles[0] == ["system", "user"] and roles[1] == ["system", "user", "assistant", "tool", "user"], roles
    compaction = read[1]
    assert compaction.blocks[3].body.lstrip().startswith("<tool_response>"), "a tool result reads as its own message"
    first = read[0].replies[0]
    assert first.lead.startswith("<|im_start|>assistant") and [p.kind for p in first.parts] == [
        "thinking",
        "text",
        "tool_call",
        "text",
    ]
    thinking, _, call, _ = first.parts
    tokens = read[0].segment.tokens
    assert texts.text(tokens[thinking.start : thinking.end]).startswith("<think>") and texts.text(
        tokens[call.start : call.end]
    ).endswith("</tool_call>")
    assert all(read[0].segment.loss_mask[first.start : first.end]), "a reply is what was sampled"


def test_without_a_turn_log_each_sampled_run_is_a_reply():
    texts = TokenTexts.from_dir(ensure_qwen_tokenizer())
    segment = TokenSegment(
        kind="role",
        tokens=[1, 2, 3, 4, 5, 6],
        loss_mask=[0, 0, 1, 1, 0, 1],
        rollout_log_probs=[0, 0, -0.1, -0.2, 0, -0.3],
        prompt_length=2,
        turns=2,
        finish_reason="stop",
    )
    (read,) = conversations([segment], None, texts)
    assert [(r.number, r.start, r.end, r.finish_reason) for r in read.replies] == [(1, 2, 4, ""), (2, 5, 6, "stop")]
    assert [(b.start, b.end) for b in read.blocks if isinstance(b, ContextMessage)] == [(0, 2), (4, 5)]
