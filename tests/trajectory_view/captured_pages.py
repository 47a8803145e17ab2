"""A rollout page made of real Claude Code requests (main, compaction, continuation, sub-agent) answered by a
scripted policy of its own whose weight version moves between calls, with a grading that found tampering."""

from __future__ import annotations

from pathlib import Path

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.grading import DiffReport, EvalResult
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import pack_trajectory, read_trajectory
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.trajectory_view.rollout_page import PageSettings, RolloutView, render_rollout, with_conversation
from durable_rollouts.trajectory_view.token_text import TokenTexts
from tests.wire_fixtures import session_from_captures

PATCH = (
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return "
    "a - b\n+    return a + b\n"
)


async def captured_session(adapter, renderer):
    """The session's result; the policy's weight version is 1 for the first call, then 2, 2 and 3."""
    policy = ScriptedPolicyServer(renderer, default_policy="oracle", delay_s=0.0, weight_version="1")
    policy.url = await policy.start()
    versions = {1: "2", 3: "3"}

    async def bump(call: int) -> None:
        if call in versions:
            policy.control.set_version(versions[call])

    try:
        return await session_from_captures(adapter, policy, bump)
    finally:
        await policy.stop()


def captured_result(session) -> RolloutResult:
    return RolloutResult(
        workflow_id="rollout-captures-calc-0-0",
        instance_id="calc",
        sample_index=0,
        group_index=0,
        status="completed",
        reward=0.0,
        applied_cleanly=True,
        attempts=1,
        turns=len(session.turn_log.turns),
        elapsed_s=12.5,
        agent=AgentRun(
            session_id=session.session_id,
            exit_code=0,
            reason="completed",
            is_error=False,
            turns=4,
            log='{"type":"result"}\n',
        ),
        evaluation=EvalResult(
            reward=0.0,
            solved=False,
            applied_cleanly=True,
            grader="eval_cmd",
            apply_method="git apply --3way",
            tests_passed=8,
            tampered=["tests/test_calc.py: a test file the patch changed was reset and its run differs"],
            reset_paths=["tests/test_calc.py"],
            log_tail="[eval_cmd exit 0]\n8 passed in 0.10s",
        ),
        trajectory=pack_trajectory(session.segments, session.turn_log),
        diff=DiffReport(patch_bytes=len(PATCH), kept_patch=PATCH),
    )


def write_captured_page(result: RolloutResult, path: Path, contract: str = "current") -> RolloutView:
    """``result``'s page at ``path`` as ``starter.py show --html`` makes it, under ``contract``."""
    assert result.trajectory is not None
    settings = PageSettings(
        TokenTexts.from_dir(ensure_qwen_tokenizer()),
        ContractChoice(contract, f"ROLLOUT_SLIME_SAMPLE_CONTRACT={contract}"),
    )
    view = with_conversation(
        RolloutView(result.workflow_id, "COMPLETED", result, trajectory=read_trajectory(result.trajectory)), settings
    )
    path.write_text(render_rollout(view, settings.texts), encoding="utf-8")
    return view
