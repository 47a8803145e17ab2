"""slime's rollout-function contract (``slime_rollout.generate_rollout``): groups from slime's data source, both
filters, the straggler handover or cut, invalid samples excluded, the metrics; and once on the real stack."""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import types
import uuid

import pytest
import pytest_asyncio
from temporalio.worker import Worker

import slime_generate
import slime_rollout
from durable_rollouts.config.settings import RolloutBudgets, SettingsError
from durable_rollouts.contracts.image_prefetch import PrefetchResult
from durable_rollouts.contracts.rollout_group import ChildRun, GroupFilter, GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.contracts.workflow_ids import group_workflow_id, prefetch_workflow_id
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import pack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.impossible_probes import probe_of, probe_seed
from durable_rollouts.trainer_client.rollout_groups import Batch, group_id
from slime_rollout import (
    GroupRules,
    GroupSource,
    Verdict,
    dynamic_filter_of,
    fill_filtered_batch,
    group_input,
    group_rules_from_env,
)
from tests.local_cluster import containers_of_runs, local_cluster
from tests.slime_args import slime_args
from tests.slime_sample import Sample
from tests.workflows.fake_rollout_activities import FakePrefetchHost
from workflows.image_prefetch import PrefetchImages

ROWS = [json.loads(line) for line in EXAMPLE_DATASET.read_text().splitlines() if line.strip()]
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)


class ExampleDataSource:
    """The trainer's side, shaped like slime's ``RolloutDataSourceWithBuffer``: groups handed back come first, then
    the rows in turn, each copied ``n_samples_per_prompt`` times and numbered (``group_index``, ``index``)."""

    def __init__(self, n_samples_per_prompt: int, rows: list[dict] = ROWS):
        self.n, self.rows = n_samples_per_prompt, rows
        self.buffer: list[list[Sample]] = []
        self.added: list[list[Sample]] = []
        self.groups_made = self.samples_made = 0

    def get_samples(self, num_samples: int) -> list[list[Sample]]:
        taken, self.buffer = self.buffer[:num_samples], self.buffer[num_samples:]
        while len(taken) < num_samples:
            taken.append([self._sample(self.rows[self.groups_made % len(self.rows)]) for _ in range(self.n)])
            self.groups_made += 1
        return taken

    def add_samples(self, samples: list[list[Sample]]) -> None:
        assert all(len(group) == self.n for group in samples), "slime's buffer takes whole groups only"
        self.added += samples
        self.buffer += samples

    def _sample(self, row: dict) -> Sample:
        self.samples_made += 1
        metadata = copy.deepcopy(row["metadata"])
        return Sample(
            group_index=self.groups_made,
            index=self.samples_made - 1,
            prompt=row["prompt"],
            label=row.get("label"),
            metadata=metadata,
        )


def test_a_slime_group_becomes_one_group_input_built_like_slime_generate_builds_a_rollout(monkeypatch):
    monkeypatch.setattr(slime_generate, "RUN_ID", "run-7")
    args = slime_args()
    (samples,) = ExampleDataSource(2).get_samples(1)
    group = group_input(args, samples, GroupRules(GroupFilter.NONZERO_VARIANCE, min_valid=1, refill_budget=0))
    instance = ROWS[0]["metadata"]["instance_id"]
    assert (group.run_id, group.group_index, group.prompt_key, group.size) == ("run-7", 0, instance, 2)
    assert (group.filter, group.min_valid, group.refill_budget) == (GroupFilter.NONZERO_VARIANCE, 1, 0)
    assert group_id(group) == group_workflow_id("run-7", instance, 0)
    task = slime_generate.task_of(samples[1])
    assert group.rollouts[1] == slime_generate.rollout_of(
        args, samples[1], task, slime_rollout.sampling_params_of(args)
    )
    assert [(r.sample_index, r.group_index) for r in group.rollouts] == [(0, 0), (1, 0)]
    assert (group.rollouts[0].policy.sampling.temperature, group.rollouts[0].policy.sampling.max_new_tokens) == (
        0.7,
        2048,
    )


def test_a_group_needs_numbered_samples():
    (samples,) = ExampleDataSource(2).get_samples(1)
    samples[1].index = None
    with pytest.raises(ValueError, match=r"samples \[1\]"):
        group_input(slime_args(), samples, GroupRules())


def test_group_rules_come_from_the_environment():
    assert group_rules_from_env({}) == GroupRules(GroupFilter.KEEP_ALL, None, None, 0.0)
    env = {
        "ROLLOUT_GROUP_FILTER": "nonzero_variance",
        "ROLLOUT_MIN_VALID": "1",
        "ROLLOUT_REFILL_BUDGET": "0",
        "ROLLOUT_IMPOSSIBLE_SHARE": "0.02",
    }
    assert group_rules_from_env(env) == GroupRules(GroupFilter.NONZERO_VARIANCE, 1, 0, 0.02)


def test_a_group_drawn_at_a_probe_slot_runs_as_the_probe_of_its_row(monkeypatch):
    monkeypatch.setattr(slime_generate, "RUN_ID", "run-7")
    (samples,) = ExampleDataSource(2).get_samples(1)
    group = group_input(slime_args(), samples, GroupRules(impossible_share=1.0))
    task = slime_generate.task_of(samples[0])
    assert [rollout.task for rollout in group.rollouts] == [
        probe_of(task, probe_seed("run-7", samples[0].group_index))
    ] * 2
    assert group.prompt_key == f"{task.instance_id}.probe-{probe_seed('run-7', samples[0].group_index)}"
    assert group_input(slime_args(), samples, GroupRules(impossible_share=0.0)).prompt_key == task.instance_id


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ROLLOUT_GROUP_FILTER", "dapo"),
        ("ROLLOUT_MIN_VALID", "-1"),
        ("ROLLOUT_REFILL_BUDGET", "two"),
        ("ROLLOUT_IMPOSSIBLE_SHARE", "5%"),
    ],
)
def test_a_bad_group_setting_names_its_variable(name, value):
    with pytest.raises(SettingsError, match=name):
        group_rules_from_env({name: value})


def test_a_row_that_cannot_run_is_set_aside_and_replaced_by_the_next_one():
    no_image = {**ROWS[0], "metadata": {k: v for k, v in ROWS[0]["metadata"].items() if k != "image"}}
    source = GroupSource(slime_args(), ExampleDataSource(2, [no_image, ROWS[1]]), GroupRules())
    (group,) = source(1)
    assert (
        group.prompt_key == slime_generate.task_of(source.samples_of[group_id(group)][0]).instance_id
        and group.group_index == 1
    )
    assert [[s.group_index for s in samples] for samples in source.unusable] == [[0, 0]]
    assert [s.index for s in source.samples_of[group_id(group)]] == [2, 3]


def completed(sample_index: int, reward: float) -> RolloutResult:
    segment = TokenSegment(
        kind="main",
        tokens=[1, 2, 3, 4],
        loss_mask=[0, 0, 1, 1],
        rollout_log_probs=[0.0, 0.0, -0.5, -0.5],
        prompt_length=2,
        turns=1,
        finish_reason="stop",
    )
    workflow_id = f"rollout-r-calc-{sample_index}-0"
    return RolloutResult(
        workflow_id=workflow_id,
        instance_id="calc",
        sample_index=sample_index,
        group_index=0,
        status="completed",
        reward=reward,
        trajectory=pack_trajectory([segment]),
    )


def test_an_invalid_sample_is_excluded_from_the_loss_and_leaves_the_group_mean_as_it_is():
    boot_failures = [
        ChildRun(
            workflow_id=f"w2{suffix}", status="aborted", abort_reason="sandbox_boot_failed", outcome="infrastructure"
        )
        for suffix in ("", "-refill1")
    ]
    result = GroupResult(
        workflow_id="group-r-calc-0",
        status="insufficient",
        samples=[
            GroupSample(sample_index=0, valid=True, outcome="model", rollout=completed(0, 1.0)),
            GroupSample(sample_index=1, valid=True, outcome="model", rollout=completed(1, 0.0)),
            GroupSample(
                sample_index=2,
                valid=False,
                outcome="infrastructure",
                invalid_reason="sandbox_boot_failed",
                runs=boot_failures,
            ),
        ],
        kept=True,
    )
    samples = [Sample(group_index=0, index=i, metadata={"instance_id": "calc"}) for i in range(3)]
    solved, unsolved, (excluded,) = slime_rollout.group_samples(result, samples)
    assert [(s.reward, s.status, s.loss_mask, s.rollout_id) for s in [*solved, *unsolved]] == [
        (1.0, Sample.Status.COMPLETED, [1, 1], 0),
        (0.0, Sample.Status.COMPLETED, [1, 1], 1),
    ]
    assert excluded is samples[2] and excluded.remove_sample, "slime zeroes the loss mask of a removed sample"
    assert (excluded.tokens, excluded.response_length, excluded.loss_mask, excluded.status) == (
        [0, 0],
        1,
        [0],
        Sample.Status.ABORTED,
    )
    assert excluded.reward == 0.5, "the group's mean valid reward: slime still averages it into the group"
    assert (excluded.rollout_id, excluded.metadata["abort_reason"], excluded.metadata["invalid_outcome"]) == (
        2,
        "sandbox_boot_failed",
        "infrastructure",
    )
    assert excluded.metadata["workflow_ids"] == ["w2", "w2-refill1"]


FILTERS = """
from dataclasses import dataclass

@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None

SEEN = []

def nonzero_std(args, samples):
    SEEN.append((args, samples))
    rewards = [sample.get_reward_value(args) for sample in samples]
    keep = max(rewards) > min(rewards)
    return DynamicFilterOutput(keep=keep, reason=None if keep else f"zero_std_{rewards[0]}")

def legacy(args, samples):
    return len(samples) > 2
"""


def test_the_dynamic_filter_is_called_as_slime_calls_it_with_one_sample_per_rollout(tmp_path, monkeypatch):
    module = f"dynamic_filters_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{module}.py").write_text(FILTERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = slime_args(dynamic_sampling_filter_path=f"{module}.nonzero_std", reward_key=None)
    judge = dynamic_filter_of(args)
    mixed = [[Sample(index=0, reward=1.0), Sample(index=0, reward=1.0)], [Sample(index=1, reward=0.0)]]
    alike = [[Sample(index=0, reward=1.0)], [Sample(index=1, reward=1.0)]]
    assert (judge(mixed), judge(alike)) == (Verdict(keep=True), Verdict(keep=False, reason="zero_std_1.0"))
    seen_args, seen = sys.modules[module].SEEN[0]
    assert seen_args is args and [(s.index, s.reward) for s in seen] == [(0, 1.0), (1, 0.0)], (
        "fn(args, samples): one Sample per rollout"
    )
    assert all(isinstance(s, Sample) for s in seen) and mixed[0][0] is not seen[0], (
        "copies: the batch's Samples stay as they are"
    )
    assert dynamic_filter_of(slime_args(dynamic_sampling_filter_path=f"{module}.legacy"))(mixed) == Verdict(
        keep=False
    ), "a bare bool is keep"
    assert dynamic_filter_of(slime_args())(alike) == Verdict(keep=True), "no filter keeps every group"


def test_under_the_seed_contract_the_filter_sees_the_rollouts_whole_reward(monkeypatch):
    monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "seed")
    split = [[Sample(index=0, reward=0.5), Sample(index=0, reward=0.5)], [Sample(index=1, reward=0.0)]]
    assert [s.reward for s in slime_rollout.rollout_view(split)] == [1.0, 0.0]


def finished(group_index: int, refilled: int = 0) -> GroupResult:
    slots = [GroupSample(sample_index=i, valid=True, outcome="model") for i in range(2)]
    return GroupResult(
        workflow_id=f"g{group_index}",
        group_index=group_index,
        status="completed",
        samples=slots,
        refilled=refilled,
        kept=True,
    )


class ScriptedFill:
    """Stands in for ``fill_batch``: places the scripted finished groups through ``accept`` the way ``_place`` does
    (a rejected one among the dropped, marked ``trainer_filter``; ``remaining`` the started groups not dropped,
    counting ``started`` groups) and records the ``wanted`` it was called with."""

    def __init__(self, finished_groups: list[GroupResult], started: int | None = None, **batch_fields):
        self.finished, self.batch_fields, self.calls = finished_groups, batch_fields, []
        self.started = len(finished_groups) if started is None else started

    async def __call__(self, wanted: int, accept) -> Batch:
        self.calls.append(wanted)
        batch = Batch(**self.batch_fields)
        dropped = 0
        for result in self.finished:
            if len(batch.groups) < wanted and await accept(result, self.started - dropped):
                batch.groups.append(result)
            elif len(batch.groups) < wanted:
                dropped += 1
                batch.dropped.append(result.model_copy(update={"kept": False, "dropped_by": "trainer_filter"}))
        return batch


def judged_by(verdicts: dict[int, Verdict]):
    """``samples_for`` and ``judge`` over fake Samples that only name their group."""

    async def samples_for(result):
        return [[result.group_index]]

    return samples_for, (lambda samples: verdicts.get(samples[0][0], Verdict(keep=True)))


async def test_a_group_the_dynamic_filter_drops_is_replaced_in_the_same_batch_and_the_metrics_count_it():
    failed = GroupResult(workflow_id="g9", group_index=9, status="failed", dropped_by="not_completed")
    straggler = GroupResult(workflow_id="g8", group_index=8, status="cut", dropped_by="not_completed")
    fill = ScriptedFill(
        [finished(4, refilled=1), finished(2), finished(1)],
        dropped=[failed],
        cut=[straggler],
        handed_over=["next"],
        time_to_batch_s=3.0,
    )
    fill.batch_fields["started"] = 5
    samples_for, judge = judged_by({4: Verdict(keep=False, reason="zero_std_1.0")})
    filled = await fill_filtered_batch(fill, 2, samples_for, judge)
    assert fill.calls == [2], "one batch: the rejected group was replaced inside it"
    assert [g.group_index for g in filled.batch.groups] == [1, 2] and filled.samples == [[[1]], [[2]]]
    assert [(g.group_index, g.dropped_by) for g in filled.batch.dropped] == [
        (9, "not_completed"),
        (4, "trainer_filter"),
    ]
    metrics = slime_rollout.rollout_metrics(filled, unusable_rows=1)
    assert metrics == {
        "rollout/groups": 2,
        "rollout/groups_started": 5,
        "rollout/samples": 4,
        "rollout/samples_valid": 4,
        "rollout/samples_refilled": 1,
        "rollout/samples_tampered": 0,
        "rollout/tampered_share": 0.0,
        "rollout/samples_screened": 0,
        "rollout/screened_share": 0.0,
        "rollout/groups_filtered": 1,
        "rollout/groups_failed": 1,
        "rollout/groups_probe": 0,
        "rollout/probes_cheated": 0,
        "rollout/probes_held": 0,
        "rollout/probes_void": 0,
        "rollout/cheating_rate": 0.0,
        "rollout/groups_cut": 1,
        "rollout/groups_handed_over": 1,
        "rollout/time_to_batch_s": 3.0,
        "rollout/dynamic_filter/drop_zero_std_1.0": 1,
        "rollout/groups_unusable_row": 1,
    }


async def test_a_rejected_group_marked_keep_when_insufficient_is_kept_only_when_dropping_it_would_leave_too_few():
    fallback = Verdict(keep=False, reason="zero_std_0.0", keep_when_insufficient=True)
    samples_for, judge = judged_by({0: fallback, 1: fallback, 2: Verdict(keep=True)})
    exact = await fill_filtered_batch(ScriptedFill([finished(0), finished(1), finished(2)]), 3, samples_for, judge)
    assert [g.group_index for g in exact.batch.groups] == [0, 1, 2] and exact.batch.dropped == [] and exact.drops == {}
    spare = await fill_filtered_batch(
        ScriptedFill([finished(0), finished(1), finished(2)], started=4), 3, samples_for, judge
    )
    assert [g.group_index for g in spare.batch.dropped] == [0], "4 started: dropping the first leaves 3, enough"
    assert [g.group_index for g in spare.batch.groups] == [1, 2] and spare.drops == {"zero_std_0.0": 1}


async def test_a_source_that_runs_dry_ends_the_batch_short():
    samples_for, judge = judged_by({})
    filled = await fill_filtered_batch(ScriptedFill([finished(0)]), 2, samples_for, judge)
    assert [g.group_index for g in filled.batch.groups] == [0]


def test_evaluation_is_slimes_own_with_each_sample_run_by_slime_generate(monkeypatch):
    calls = []

    def default_rollout(args, rollout_id, data_source, evaluation=False):
        calls.append((args.custom_generate_function_path, rollout_id, data_source, evaluation))
        return "slime's RolloutFnEvalOutput"

    fake = types.ModuleType("slime.rollout.sglang_rollout")
    fake.generate_rollout = default_rollout
    for name in ("slime", "slime.rollout"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "slime.rollout.sglang_rollout", fake)
    args = slime_args(custom_generate_function_path=None)
    assert slime_rollout.generate_rollout(args, 5, "source", evaluation=True) == "slime's RolloutFnEvalOutput"
    assert calls == [("slime_generate.generate", 5, "source", True)] and args.custom_generate_function_path is None


def test_without_slime_the_output_has_slimes_fields_and_coroutines_share_one_loop():
    output = slime_rollout.train_output([[["sample"]]], {"rollout/groups": 1})
    assert (output.samples, output.metrics) == ([[["sample"]]], {"rollout/groups": 1})

    async def current_loop():
        return asyncio.get_running_loop()

    assert slime_rollout.run_blocking(current_loop()) is slime_rollout.run_blocking(current_loop())


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start()
    async with local_cluster(policy_url, tmp_path_factory.mktemp("results"), BUDGETS) as (env, settings):
        yield env, settings
    await policy.stop()


def assert_solved_groups(output, n_groups: int, n_samples: int) -> None:
    assert len(output.samples) == n_groups
    for group in output.samples:
        assert len(group) == n_samples and len({s.group_index for fragments in group for s in fragments}) == 1
        for fragments in group:
            per_rollout = (
                sum(s.reward for s in fragments)
                if slime_generate.sample_contract().name == "seed"
                else min(s.reward for s in fragments)
            )
            assert per_rollout == 1.0 and {s.rollout_id for s in fragments} == {fragments[0].index}
            assert all(s.status is Sample.Status.COMPLETED and sum(s.loss_mask) > 0 for s in fragments)
            assert not any(getattr(s, "remove_sample", False) for s in fragments)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_drop_in_fills_a_batch_of_groups_hands_the_straggler_back_and_attaches_to_it_next_time(
    cluster, task_images, monkeypatch
):
    """Real Temporal, worker, sandboxes, Claude Code and graders; the oracle solves every example task. slime's
    synchronous call runs in a thread, as slime's rollout manager makes it."""
    env, settings = cluster
    run_id = f"sr{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
    monkeypatch.setenv("ROLLOUT_TASK_QUEUE", settings.task_queue)
    monkeypatch.setattr(slime_generate, "RUN_ID", run_id)
    args = slime_args(hf_checkpoint=str(ensure_qwen_tokenizer()))
    source = ExampleDataSource(args.n_samples_per_prompt)

    output = await asyncio.to_thread(slime_rollout.generate_rollout, args, 0, source)
    assert_solved_groups(output, 2, 2)
    metrics = output.metrics
    assert (metrics["rollout/groups"], metrics["rollout/samples_valid"]) == (2, 4)
    assert (metrics["rollout/samples_refilled"], metrics["rollout/groups_cut"]) == (0, 0)
    handed_over = metrics["rollout/groups_handed_over"]
    assert (
        handed_over >= 1
        and metrics["rollout/groups_started"] == 2 + handed_over
        and "rollout/time_to_batch_s" in metrics
    )
    assert len(source.added) == handed_over, "every group beyond the batch went back to the data source"
    assert not {g[0].group_index for g in source.added} & {group[0][0].group_index for group in output.samples}
    assert {(s.status, tuple(s.tokens)) for g in source.added for s in g} == {(Sample.Status.PENDING, ())}, (
        "handed back untouched"
    )
    first = source.added[0][0]
    straggler = env.client.get_workflow_handle(
        group_workflow_id(run_id, slime_generate.task_of(first).instance_id, first.group_index)
    )
    first_run = (await straggler.describe()).run_id

    args.partial_rollout = False
    again = await asyncio.to_thread(slime_rollout.generate_rollout, args, 1, source)
    assert_solved_groups(again, 2, 2)
    assert source.buffer == [] and (await straggler.describe()).run_id == first_run, (
        "drawn again, attached to, not re-run"
    )
    not_kept = again.metrics["rollout/groups_cut"] + again.metrics["rollout/groups_handed_over"]
    assert not_kept == again.metrics["rollout/groups_started"] - 2 and len(source.added) == handed_over, (
        "cut, not handed back"
    )
    assert await containers_of_runs([run_id]) == [], "a cut straggler's sandboxes (agent or grading) are gone with it"


HOOKS = """
CALLS = []

def tag(args, sample, rollout_id):
    CALLS.append(("tag", sample.index, rollout_id))
    sample.metadata = {**(sample.metadata or {}), "tagged": rollout_id}

async def replace(args, sample, **kwargs):
    CALLS.append(("replace", sample.index, kwargs))
    return sample

def batch_filter(args, data):
    CALLS.append(("filter", len(data)))

def all_samples(args, samples, data_source):
    CALLS.append(("all", [group[0][0].index for group in samples], data_source))
"""


async def test_sample_hooks_and_batch_functions_run_as_slimes_default_rollout_runs_them(tmp_path, monkeypatch):
    module = f"hooks_{uuid.uuid4().hex[:6]}"
    (tmp_path / f"{module}.py").write_text(HOOKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = slime_args(
        rollout_sample_hook_path=[f"{module}.tag", f"{module}.replace"],
        rollout_sample_filter_path=f"{module}.batch_filter",
        rollout_all_samples_process_path=f"{module}.all_samples",
    )
    group = [[Sample(index=4)], [Sample(index=5), Sample(index=5)]]
    hooked = await slime_rollout.apply_sample_hooks(args, group, rollout_id=7)
    calls = sys.modules[module].CALLS
    assert [c[:2] for c in calls] == [
        ("tag", 4),
        ("replace", 4),
        ("tag", 5),
        ("replace", 5),
        ("tag", 5),
        ("replace", 5),
    ]
    assert calls[1][2] == {"rollout_id": 7, "evaluation": False} and all(
        s.metadata["tagged"] == 7 for f in hooked for s in f
    )
    filled = slime_rollout.FilledBatch(samples=[hooked], all_samples=[[[Sample(index=9)]], hooked])
    slime_rollout.run_batch_functions(args, filled, "source")
    assert calls[-2:] == [("filter", 1), ("all", [4, 9], "source")], (
        "the batch, then every judged group sorted by index"
    )


def test_groups_handed_back_carry_their_start_rollout_id_and_mask_older_weights_when_asked():
    group = [Sample(index=0, metadata={}), Sample(index=1, metadata={"start_rollout_id": 2})]
    assert [s.metadata["start_rollout_id"] for s in slime_rollout.stamped(group, 5)] == [5, 2]
    spans = [{"version": "3", "start": 0, "end": 2}, {"version": "4", "start": 3, "end": 4}]
    sample = Sample(
        loss_mask=[1, 1, 0, 1],
        rollout_log_probs=[-1.0, -1.0, 0.0, -1.0],
        weight_versions=["3", "4"],
        metadata={"weight_version_spans": spans},
    )
    slime_rollout.mask_older_versions(sample)
    assert (sample.loss_mask, sample.rollout_log_probs, sample.weight_versions) == (
        [0, 0, 0, 1],
        [0.0, 0.0, 0.0, -1.0],
        ["4"],
    )
    assert sample.metadata["weight_version_spans"] == [spans[1]]


@pytest.mark.asyncio(loop_scope="session")
async def test_the_images_of_the_next_calls_prompts_are_announced_without_drawing_them(env, monkeypatch):
    """A data source laid out as slime's (``dataset.samples`` from ``sample_offset``): the next prompts' images go to
    one ``PrefetchImages`` (a row that cannot run is left out), and the data source hands out the same prompts next."""
    monkeypatch.setattr(slime_generate, "RUN_ID", f"pf{uuid.uuid4().hex[:6]}")
    no_image = {**ROWS[0], "metadata": {k: v for k, v in ROWS[0]["metadata"].items() if k != "image"}}
    prompts = [
        Sample(prompt=row["prompt"], label=row.get("label"), metadata=copy.deepcopy(row["metadata"]))
        for row in [ROWS[0], no_image, *ROWS[1:]]
    ]
    source = types.SimpleNamespace(dataset=types.SimpleNamespace(samples=prompts), sample_offset=1)
    fake, queue = FakePrefetchHost(busy=set(), missing=set()), f"pf-{uuid.uuid4().hex[:6]}"
    images = [slime_generate.task_of(prompt).image for prompt in prompts[2:4]]
    async with Worker(env.client, task_queue=queue, workflows=[PrefetchImages], activities=[fake.prefetch_image]):
        await slime_rollout.prefetch_next(env.client, queue, source, 3)
        handle = env.client.get_workflow_handle(
            prefetch_workflow_id(slime_generate.RUN_ID, images), result_type=PrefetchResult
        )
        result = await handle.result()
    assert [p.image for p in result.images] == list(dict.fromkeys(images)) and source.sample_offset == 1
