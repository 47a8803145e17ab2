"""A page's text is the rollout's, escaped: nothing in a tool result, a patch, a log or an id can open a tag or
leave the token data's script."""

import json
import re

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.grading import DiffReport, EvalResult
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import SampledTurn, TokenSegment, TurnLog
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.trajectory_view.rollout_page import PageSettings, RolloutView, render_rollout, with_conversation
from durable_rollouts.trajectory_view.token_text import TokenTexts

HOSTILE = "<img src=x onerror=alert(1)></script><script>alert(2)</script><!--<script>"


def test_hostile_text_is_escaped_everywhere_and_the_token_data_stays_json(renderer):
    texts = TokenTexts.from_dir(ensure_qwen_tokenizer())
    prompt = renderer.encode(f"<|im_start|>user\n{HOSTILE}<|im_end|>\n<|im_start|>assistant\n")
    reply = renderer.encode(f"{HOSTILE}<|im_end|>")
    n = len(prompt) + len(reply)
    segment = TokenSegment(
        kind="main",
        tokens=prompt + reply,
        loss_mask=[0] * len(prompt) + [1] * len(reply),
        rollout_log_probs=[0.0] * len(prompt) + [float("-inf")] + [-0.5] * (len(reply) - 1),
        prompt_length=len(prompt),
        turns=1,
        finish_reason="stop",
        weight_version_spans=[{"start": len(prompt), "end": n, "version": HOSTILE}],
    )
    log = TurnLog(
        turns=[
            SampledTurn(
                segment=0, prompt_end=len(prompt), end=n, finish_reason="stop", prompt_messages=[0], reply_message=1
            )
        ],
        message_keys=["user:a", "assistant:b"],
    )
    result = RolloutResult(
        workflow_id=f"rollout-{HOSTILE}",
        instance_id=HOSTILE,
        sample_index=0,
        group_index=0,
        status="aborted",
        abort_reason=HOSTILE,
        agent=AgentRun(session_id="s", exit_code=0, reason=HOSTILE, is_error=False, log=HOSTILE),
        evaluation=EvalResult(
            reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", tampered=[HOSTILE], log_tail=HOSTILE
        ),
        diff=DiffReport(kept_patch=f"+{HOSTILE}\n", note=HOSTILE),
    )
    view = with_conversation(
        RolloutView(result.workflow_id, "COMPLETED", result, trajectory=Trajectory([segment], log)),
        PageSettings(texts, ContractChoice("current", HOSTILE)),
    )
    page = render_rollout(view, texts)
    assert "<img" not in page and "<!--" not in page and "alert(2)</script>" not in page
    assert page.count("<script") == 2, "the token data and the page's script, nothing else"
    data = json.loads(re.search(r'<script type="application/json" id="token-data">(.*?)</script>', page, re.S).group(1))
    assert data["versions"] == [HOSTILE] and data["replies"][0]["lp"][0] is None, (
        "a non-finite log-prob is null, and the JSON parses"
    )
