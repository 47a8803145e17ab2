"""Small hand-made segments of one Claude Code session (main, its compaction, the continuation, a sub-agent) and the
completed rollout result samples are built from."""

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.contracts.weight_versions import WeightVersionSpan


def segment(kind, tokens, prompt_length, sampled, lane="main", version=None, **extra) -> TokenSegment:
    """``tokens`` with the positions in ``sampled`` (a set) trainable, log-prob -(position+1)/10 there."""
    mask = [1 if i in sampled else 0 for i in range(len(tokens))]
    runs = []
    for i in sorted(sampled):
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    spans = [WeightVersionSpan(start=a, end=b, version=version) for a, b in runs] if version else []
    if len(spans) > 1:
        spans = [WeightVersionSpan(start=spans[0].start, end=spans[-1].end, version=version)]
    return TokenSegment(
        kind=kind,
        lane=lane,
        tokens=tokens,
        loss_mask=mask,
        rollout_log_probs=[-(i + 1) / 10 if m else 0.0 for i, m in enumerate(mask)],
        prompt_length=prompt_length,
        turns=1,
        finish_reason="stop",
        weight_version_spans=spans,
        **extra,
    )


MAIN = segment("main", [1, 2, 3, 10, 11, 4, 5, 12, 13], 3, {3, 4, 7, 8}, version="3", tool_call_turns=1)
# The compaction call renders the main history exactly, then its summary request and the summary.
COMPACTION = segment("compaction", [1, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 20, 21], 11, {11, 12}, version="4")
CONTINUATION = segment("continuation", [1, 2, 30, 31, 40], 4, {4}, version="4")
SUBAGENT = segment("subagent", [1, 2, 50, 60, 61], 3, {3, 4}, lane="agent:a1", version="3", ill_formed_turns=1)


def result_of(reward: float = 1.0, solved: bool = True) -> RolloutResult:
    return RolloutResult(
        workflow_id="rollout-r-calc-3-1",
        instance_id="calc",
        sample_index=3,
        group_index=1,
        status="completed",
        reward=reward,
        solved=solved,
        applied_cleanly=True,
        elapsed_s=4.0,
        agent=AgentRun(session_id="s", exit_code=0, reason="completed", is_error=False),
    )
