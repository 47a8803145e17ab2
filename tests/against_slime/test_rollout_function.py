"""The rollout function inside slime's own code: ``call_rollout_fn``, slime's dynamic filters and sample hooks, its
``RolloutFnTrainOutput``, ``validate_rollout_id_annotated``, the flattening and conversion of
``slime/ray/rollout.py`` (its methods, run without Ray), and slime's eval path through ``slime_generate``."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.against_slime import require_slime

require_slime()

from slime.observability.rollout_data_utils import validate_rollout_id_annotated  # noqa: E402
from slime.rollout.base_types import RolloutFnTrainOutput, call_rollout_fn  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

import slime_generate  # noqa: E402
import slime_rollout  # noqa: E402
from durable_rollouts.contracts.agent_runs import AgentRun  # noqa: E402
from durable_rollouts.contracts.grading import EvalResult  # noqa: E402
from durable_rollouts.contracts.probes import ProbeVerdict  # noqa: E402
from durable_rollouts.contracts.rollout_group import GroupResult, GroupSample  # noqa: E402
from durable_rollouts.contracts.rollouts import RolloutResult  # noqa: E402
from durable_rollouts.contracts.tokens import SampledTurn, TokenSegment, TurnLog  # noqa: E402
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer  # noqa: E402
from durable_rollouts.policy.trajectory_packing import pack_trajectory  # noqa: E402
from durable_rollouts.trainer_client.rollout_groups import Batch, group_id  # noqa: E402
from tests.against_slime.slime_code import args_for, slime_conversion  # noqa: E402


def completed(index: int, reward: float) -> RolloutResult:
    """A rollout whose compaction continues its main conversation: two training samples under ``current``."""
    main = TokenSegment(
        kind="main",
        tokens=[1, 2, 3, 10, 11],
        loss_mask=[0, 0, 0, 1, 1],
        rollout_log_probs=[0, 0, 0, -0.1, -0.2],
        prompt_length=3,
        turns=1,
        finish_reason="stop",
    )
    side = TokenSegment(
        kind="subagent",
        lane="agent:a",
        tokens=[5, 6, 20],
        loss_mask=[0, 0, 1],
        rollout_log_probs=[0, 0, -0.3],
        prompt_length=2,
        turns=1,
        finish_reason="stop",
    )
    log = TurnLog(
        message_keys=["system:s", "user:u", "assistant:a", "system:sub"],
        turns=[
            SampledTurn(segment=0, prompt_end=3, end=5, finish_reason="stop", prompt_messages=[0, 1], reply_message=2),
            SampledTurn(segment=1, prompt_end=2, end=3, finish_reason="stop", prompt_messages=[3, 1], reply_message=2),
        ],
    )
    return RolloutResult(
        workflow_id=f"rollout-r-calc-{index}-0",
        instance_id="calc",
        sample_index=index,
        group_index=0,
        status="completed",
        reward=reward,
        solved=reward == 1.0,
        applied_cleanly=True,
        trajectory=pack_trajectory([main, side], log),
        agent=AgentRun(session_id="s", exit_code=0, reason="completed", is_error=False),
    )


class DataSource:
    """slime's data source shape: numbered groups of one prompt's Samples (rows the drop-in can run)."""

    def __init__(self, n: int, row: dict):
        self.n, self.row, self.made, self.added = n, row, 0, []

    def get_samples(self, k: int) -> list[list[Sample]]:
        out = []
        for _ in range(k):
            group = self.made // self.n
            out.append(
                [
                    Sample(
                        group_index=group,
                        index=self.made + i,
                        prompt=self.row["prompt"],
                        metadata=dict(self.row["metadata"]),
                    )
                    for i in range(self.n)
                ]
            )
            self.made += self.n
        return out

    def add_samples(self, samples):
        self.added += samples


def scripted_fill(rewards_by_group: dict[int, list[float]]):
    """``fill_batch`` without a cluster: every drawn group finishes at once with the given rewards."""

    async def fill(client, source, wanted, over_sample, policy, queue, *, accept, server_wait_s, refetch_chunk):
        batch = Batch()
        while len(batch.groups) < wanted:
            (group,) = source(1)
            batch.started += 1
            slots = [
                GroupSample(
                    sample_index=r.sample_index,
                    valid=True,
                    outcome="model",
                    rollout=completed(r.sample_index, reward),
                    reward=reward,
                )
                for r, reward in zip(group.rollouts, rewards_by_group[group.group_index], strict=True)
            ]
            result = GroupResult(
                workflow_id=group_id(group), group_index=group.group_index, status="completed", samples=slots, kept=True
            )
            if await accept(result, batch.started - len(batch.dropped)):
                batch.groups.append(result)
            else:
                batch.dropped.append(result)
        return batch

    return fill


@pytest.fixture
def drop_in(monkeypatch):
    import json

    from durable_rollouts.paths import EXAMPLE_DATASET

    row = json.loads(EXAMPLE_DATASET.read_text().splitlines()[0])

    async def no_client():
        return None

    monkeypatch.setattr(slime_generate, "temporal_client", no_client)
    monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "auto")
    return row


def test_slimes_filter_hooks_and_conversion_take_the_rollout_functions_output(drop_in, monkeypatch):
    monkeypatch.setattr(slime_rollout, "fill_batch", scripted_fill({0: [1.0, 1.0], 1: [1.0, 0.0], 2: [0.0, 1.0]}))
    args = args_for(
        dynamic_sampling_filter_path="slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std",
        rollout_sample_hook_path=[],
    )
    source = DataSource(2, drop_in)
    output = call_rollout_fn(slime_rollout.generate_rollout, args, 0, source, evaluation=False)
    assert isinstance(output, RolloutFnTrainOutput)
    assert output.metrics["rollout/dynamic_filter/drop_zero_std_1.0"] == 1, (
        "slime's own filter dropped the all-solved group"
    )
    assert [group[0][0].group_index for group in output.samples] == [1, 2]
    validate_rollout_id_annotated(output.samples)
    flat = output.samples
    while isinstance(flat[0], list):
        flat = list(itertools.chain.from_iterable(flat))
    assert len(flat) == 8 and all(isinstance(s, Sample) for s in flat), "two training samples per rollout"
    data = slime_conversion(args)._convert_samples_to_train_data(flat)
    assert data["rollout_ids"] == [s.index for s in flat] and data["raw_reward"] == [s.reward for s in flat]
    assert [sum(m) for m in data["loss_masks"]] == [2, 1] * 4 and data["rollout_mask_sums"] == [3] * 8


def test_slimes_fallback_filter_keeps_a_group_only_when_too_few_are_left(drop_in, monkeypatch):
    monkeypatch.setattr(slime_rollout, "fill_batch", scripted_fill({0: [1.0, 1.0], 1: [0.0, 0.0]}))
    args = args_for(
        dynamic_sampling_filter_path="slime.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std_with_fallback"
    )
    output = call_rollout_fn(slime_rollout.generate_rollout, args, 0, DataSource(2, drop_in), evaluation=False)
    assert [group[0][0].group_index for group in output.samples] == [0, 1] and output.metrics["rollout/groups"] == 2


def generate_args():
    """slime's args for ``generate_and_rm`` with ``slime_generate.generate`` as the custom generate function (its real
    ``GenerateState``, the project's tokenizer as the checkpoint)."""
    return args_for(
        custom_generate_function_path="slime_generate.generate",
        group_rm=False,
        mask_offpolicy_in_partial_rollout=False,
        hf_checkpoint=str(ensure_qwen_tokenizer()),
        sglang_server_concurrency=4,
        rollout_num_gpus=1,
        rollout_top_k=-1,
        rollout_stop=None,
        rollout_stop_token_ids=None,
        rollout_skip_special_tokens=False,
        sglang_dp_size=1,
    )


def test_slimes_eval_path_runs_the_drop_in_as_its_custom_generate_function(drop_in, monkeypatch):
    from slime.rollout import sglang_rollout

    async def collect(*args, **kwargs):
        return completed(0, 1.0)

    monkeypatch.setattr(slime_generate, "collect_rollout", collect)
    sample = Sample(index=0, group_index=0, prompt=drop_in["prompt"], metadata=dict(drop_in["metadata"]))
    out = asyncio.run(sglang_rollout.generate_and_rm(generate_args(), sample, {}, evaluation=True))
    assert isinstance(out, list) and len(out) == 1 and out[0].reward == 1.0, "one sample per rollout, its reward"
    assert out[0].remove_sample and out[0].loss_mask == [0]


def test_at_a_probe_slot_slimes_generate_and_rm_gets_one_removed_sample_and_its_conversion_trains_nothing_on_it(
    drop_in, monkeypatch
):
    """An impossible-task probe through slime's training path: ``generate_and_rm`` keeps the drop-in's reward, and
    slime's own conversion gives the probe's sample no trained token beside a rollout's real samples."""
    from slime.rollout import sglang_rollout

    probed = []

    async def collect(client, rollout, *args, **kwargs):
        probed.append(rollout.task.probe)
        judged = EvalResult(
            reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", probe=ProbeVerdict(verdict="cheated")
        )
        return RolloutResult(
            workflow_id="w",
            instance_id=rollout.task.instance_id,
            sample_index=0,
            group_index=0,
            status="completed",
            evaluation=judged,
        )

    monkeypatch.setattr(slime_generate, "collect_rollout", collect)
    monkeypatch.setenv("ROLLOUT_IMPOSSIBLE_SHARE", "1")
    args = generate_args()
    sample = Sample(index=0, group_index=0, prompt=drop_in["prompt"], metadata=dict(drop_in["metadata"]))
    (probe,) = asyncio.run(sglang_rollout.generate_and_rm(args, sample, {}, evaluation=False))
    assert probed[0] is not None and probe.metadata["impossible_probe"] == "cheated"
    assert (probe.reward, probe.remove_sample) == (0.0, True)
    real = slime_generate.samples_from_result(
        Sample(index=1, group_index=0, prompt=drop_in["prompt"]), completed(1, 1.0)
    )
    data = slime_conversion(args)._convert_samples_to_train_data([probe, *real])
    assert [sum(mask) for mask in data["loss_masks"]] == [0, 2, 1], (
        "the probe trains nothing, the real rollout its sampled tokens"
    )
