"""slime's generate() drop-in: the sample contract in force turns results into Samples; the aborted shape."""

import json
import logging
from types import SimpleNamespace

import pytest

import slime_generate
from durable_rollouts.config.settings import SettingsError
from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.contracts.weight_versions import WeightVersionSpan
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.trajectory_packing import pack_trajectory, unpack_trajectory
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.task_sources.impossible_probes import probe_of, probe_seed
from durable_rollouts.trainer_client.results_file import record_with_segments
from slime_generate import abort_sample, policy_for, sample_dicts, samples_from_result
from tests.slime_sample import Sample


def segment(kind: str, prompt: list[int], response: list[int], mask: list[int]) -> TokenSegment:
    return TokenSegment(
        kind=kind,
        tokens=prompt + response,
        loss_mask=[0] * len(prompt) + mask,
        rollout_log_probs=[0.0] * len(prompt) + [-0.5 if m else 0.0 for m in mask],
        prompt_length=len(prompt),
        turns=1,
        finish_reason="stop",
    )


def completed(segments) -> RolloutResult:
    return RolloutResult(
        workflow_id="rollout-r-calc-3-1",
        instance_id="calc",
        sample_index=3,
        group_index=1,
        status="completed",
        reward=1.0,
        solved=True,
        applied_cleanly=True,
        trajectory=pack_trajectory(segments),
        elapsed_s=12.5,
    )


SEED = ContractChoice("seed", "test")
CURRENT = ContractChoice("current", "test")


def test_seed_one_sample_per_segment_sharing_the_rollout_id_with_the_reward_split():
    result = completed([segment("main", [1, 2, 3], [4, 5, 6], [1, 0, 1]), segment("compaction", [7, 8], [9], [1])])
    sample = Sample(index=3, group_index=1, metadata={"instance_id": "calc"})
    fanned = samples_from_result(sample, result, contract=SEED)
    assert fanned[0] is sample and len(fanned) == 2
    first, second = fanned
    assert first.tokens == [1, 2, 3, 4, 5, 6] and first.response_length == 3
    assert first.loss_mask == [1, 0, 1] and first.rollout_log_probs == [-0.5, 0.0, -0.5]
    assert second.tokens == [7, 8, 9] and second.loss_mask == [1]
    assert {s.rollout_id for s in fanned} == {3} and all(s.status is Sample.Status.COMPLETED for s in fanned)
    assert [s.reward for s in fanned] == [0.5, 0.5]
    assert [s.metadata["segment_kind"] for s in fanned] == ["main", "compaction"]
    assert first.metadata["is_solved"] and first.metadata["applied_cleanly"] and first.metadata["elapsed_sec"] == 12.5


def versioned() -> RolloutResult:
    """Three generate calls: one under weights 3, one that saw the update to 4 mid-reply, one from a server
    that reported no version; then a compaction call under 4."""
    main = segment("main", [1, 2], [10, 11, 12, 0, 13, 14, 15, 0, 16, 17], [1, 1, 1, 0, 1, 1, 1, 0, 1, 1])
    main = main.model_copy(
        update={
            "weight_version_spans": [
                WeightVersionSpan(start=2, end=7, version="3"),
                WeightVersionSpan(start=7, end=9, version="4"),
            ]
        }
    )
    compaction = segment("compaction", [7, 8], [9, 9], [1, 1])
    compaction = compaction.model_copy(
        update={"weight_version_spans": [WeightVersionSpan(start=2, end=4, version="4")]}
    )
    result = completed([main, compaction])
    return result.model_copy(update={"segments": [SegmentSummary.of(main), SegmentSummary.of(compaction)]})


@pytest.mark.parametrize("contract", [SEED, CURRENT])
def test_weight_versions_are_one_per_generate_call_as_slime_fills_them(contract):
    first, second = samples_from_result(Sample(index=3, group_index=1), versioned(), contract=contract)
    assert first.weight_versions == ["3", "4"], (
        "the reply's weight_version: its last token's; the unversioned call adds none"
    )
    assert second.weight_versions == ["4"]
    assert first.metadata["weight_version_spans"] == [
        {"version": "3", "start": 0, "end": 5},
        {"version": "4", "start": 5, "end": 7},
    ]
    assert len(first.loss_mask) == first.response_length, (
        "spans index the response, like loss_mask and rollout_log_probs"
    )
    assert first.weight_versions is not second.weight_versions
    (plain, _) = sample_dicts(versioned(), contract=contract)
    assert plain["weight_versions"] == ["3", "4"]


def test_the_results_line_carries_the_spans_and_the_rollouts_version_summary():
    record = record_with_segments(versioned())
    assert (record["oldest_weight_version"], record["newest_weight_version"], record["weight_version_changes"]) == (
        "3",
        "4",
        1,
    )
    assert [s["weight_version_spans"] for s in record["segments"]] == [
        [{"start": 2, "end": 7, "version": "3"}, {"start": 7, "end": 9, "version": "4"}],
        [{"start": 2, "end": 4, "version": "4"}],
    ]
    assert [TokenSegment.model_validate(s) for s in record["segments"]] == unpack_trajectory(versioned().trajectory)


@pytest.mark.parametrize("contract, removed", [(SEED, False), (CURRENT, True)])
def test_aborted_rollouts_take_the_reference_shape_and_today_are_removed(contract, removed):
    result = RolloutResult(
        workflow_id="w",
        instance_id="calc",
        sample_index=0,
        group_index=0,
        status="aborted",
        abort_reason="wall_clock_timeout",
    )
    (sample,) = samples_from_result(Sample(index=0, weight_versions=["stale"]), result, contract=contract)
    assert sample.status is Sample.Status.ABORTED and sample.metadata["abort_reason"] == "wall_clock_timeout"
    assert (sample.tokens, sample.response_length, sample.loss_mask, sample.reward) == ([0, 0], 1, [0], 0.0)
    assert sample.weight_versions == [] and sample.remove_sample is removed


@pytest.mark.parametrize("contract", [SEED, CURRENT])
def test_without_slime_the_same_data_comes_as_dicts(contract):
    (plain,) = sample_dicts(completed([segment("main", [1], [2], [1])]), contract=contract)
    assert plain["tokens"] == [1, 2] and plain["loss_mask"] == [1] and plain["status"] == "completed"
    assert plain["reward"] == 1.0 and plain["rollout_id"] is None
    assert abort_sample(Sample(), "x", contract).status is Sample.Status.ABORTED


def test_the_contract_in_force_is_logged_once_per_choice(monkeypatch, caplog):
    monkeypatch.setattr(slime_generate, "_announced", set())
    monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "seed")
    with caplog.at_level(logging.INFO, logger="slime_generate"):
        for _ in range(3):
            abort_sample(Sample(), "x")
        monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "current")
        assert abort_sample(Sample(), "x").remove_sample
    lines = [r.getMessage() for r in caplog.records if "sample contract" in r.getMessage()]
    assert [line.split(" (")[0] for line in lines] == ["slime sample contract: seed", "slime sample contract: current"]


def test_trainer_args_become_the_session_policy():
    args = SimpleNamespace(
        sglang_router_ip="10.0.0.5", sglang_router_port=30000, rollout_max_context_len=32768, hf_checkpoint=""
    )
    policy = policy_for(args, {"temperature": 0.7, "top_p": 0.95, "max_new_tokens": 4096, "stop": ["x"]})
    assert policy.policy_url == "http://10.0.0.5:30000" and policy.context_budget == 32768
    assert (policy.sampling.temperature, policy.sampling.top_p, policy.sampling.max_new_tokens) == (0.7, 0.95, 4096)


def test_the_trainers_engine_reaches_the_policy_and_unset_leaves_it_to_the_worker(monkeypatch):
    assert policy_for(SimpleNamespace(), {}).engine is None
    monkeypatch.setenv("ROLLOUT_POLICY_ENGINE", "vllm")
    assert policy_for(SimpleNamespace(), {}).engine == "vllm"
    monkeypatch.setenv("ROLLOUT_POLICY_ENGINE", "vLLM")
    with pytest.raises(SettingsError, match="ROLLOUT_POLICY_ENGINE: 'vLLM' is not one of sglang, vllm"):
        policy_for(SimpleNamespace(), {})


def test_slimes_parser_flags_reach_the_policy_and_a_wrong_name_stops_the_trainer():
    args = SimpleNamespace(
        sglang_router_ip=None, sglang_router_port=None, sglang_tool_call_parser="glm45", sglang_reasoning_parser="glm45"
    )
    policy = policy_for(args, {})
    assert (policy.tool_parser, policy.reasoning_parser) == ("glm45", "glm45")
    assert (policy_for(SimpleNamespace(), {}).tool_parser, policy_for(SimpleNamespace(), {}).reasoning_parser) == (
        None,
        None,
    )
    with pytest.raises(
        SettingsError, match="--sglang-tool-call-parser: unknown tool-call parser 'qwen3-coder'; supported: auto, "
    ):
        policy_for(SimpleNamespace(sglang_tool_call_parser="qwen3-coder"), {})


def test_slimes_stop_strings_and_stop_token_ids_reach_every_turn():
    params = {
        "temperature": 1.0,
        "max_new_tokens": 64,
        "stop": "</done>",
        "stop_token_ids": [248046, 248044],
        "no_stop_trim": True,
    }
    spec = policy_for(SimpleNamespace(), params)
    assert (spec.sampling.stop, spec.sampling.stop_token_ids) == (["</done>"], [248046, 248044])


async def test_under_partial_rollout_generate_stops_with_a_line_instead_of_crashing_inside_slime():
    with pytest.raises(SettingsError, match="--rollout-function-path slime_rollout.generate_rollout"):
        await slime_generate.generate(SimpleNamespace(partial_rollout=True), Sample(index=0), {})


async def test_evaluation_returns_one_sample_per_rollout_with_its_reward(monkeypatch):
    result = completed([segment("main", [1, 2], [3, 4], [1, 1]), segment("subagent", [5], [6], [1])])

    async def collect(*args, **kwargs):
        return result

    async def no_client():
        return None

    monkeypatch.setattr(slime_generate, "collect_rollout", collect)
    monkeypatch.setattr(slime_generate, "temporal_client", no_client)
    row = json.loads(EXAMPLE_DATASET.read_text().splitlines()[0])
    sample = Sample(index=3, group_index=1, prompt=row["prompt"], label=row.get("label"), metadata=row["metadata"])
    (out,) = await slime_generate.generate(SimpleNamespace(partial_rollout=True), sample, {}, evaluation=True)
    assert out is sample and (out.reward, out.status, out.remove_sample) == (1.0, Sample.Status.COMPLETED, True)
    assert (out.tokens, out.loss_mask, out.response_length) == ([0, 0], [0], 1) and "abort_reason" not in out.metadata
    assert (out.metadata["grading_solved"], out.metadata["workflow_id"]) == (True, "rollout-r-calc-3-1")
    aborted = result.model_copy(update={"status": "aborted", "abort_reason": "wall_clock_timeout", "reward": 0.0})
    (lost,) = [slime_generate.eval_sample(Sample(index=4), aborted)]
    assert (lost.reward, lost.status, lost.metadata["abort_reason"]) == (
        0.0,
        Sample.Status.ABORTED,
        "wall_clock_timeout",
    )


async def test_at_a_probe_slot_the_rollout_runs_the_probe_and_comes_back_as_one_untrained_sample(monkeypatch):
    started = []
    verdict = EvalResult(
        reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", probe=ProbeVerdict(verdict="cheated")
    )

    async def collect(client, rollout, *args, **kwargs):
        started.append(rollout)
        return RolloutResult(
            workflow_id="w",
            instance_id=rollout.task.instance_id,
            sample_index=0,
            group_index=1,
            status="completed",
            evaluation=verdict,
        )

    async def no_client():
        return None

    monkeypatch.setattr(slime_generate, "collect_rollout", collect)
    monkeypatch.setattr(slime_generate, "temporal_client", no_client)
    monkeypatch.setenv("ROLLOUT_IMPOSSIBLE_SHARE", "1")
    row = json.loads(EXAMPLE_DATASET.read_text().splitlines()[0])
    sample = Sample(index=3, group_index=1, prompt=row["prompt"], label=row.get("label"), metadata=row["metadata"])
    (out,) = await slime_generate.generate(SimpleNamespace(), sample, {})
    task = slime_generate.task_of(Sample(index=3, group_index=1, prompt=row["prompt"], metadata=row["metadata"]))
    assert started[0].task == probe_of(task, probe_seed(slime_generate.RUN_ID, 1))
    assert (out.remove_sample, out.reward, out.loss_mask, out.metadata["impossible_probe"]) == (
        True,
        0.0,
        [0],
        "cheated",
    )
    assert (out.metadata["instance_id"], out.metadata["probe_instance_id"]) == (
        task.instance_id,
        started[0].task.instance_id,
    )
    await slime_generate.generate(SimpleNamespace(), sample, {}, evaluation=True)
    assert (started[1].task.instance_id, started[1].task.probe) == (task.instance_id, None), (
        "evaluation never runs probes"
    )
