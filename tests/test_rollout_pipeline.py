"""The whole rollout for real: Temporal dev server, worker, Docker sandboxes, Claude Code, graders.

The scripted policy server stands in for SGLang (no GPU here) and records what
it sampled, so the trajectories can be checked token for token.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from types import SimpleNamespace

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

import slime_generate
from durable_rollouts.config.settings import RolloutBudgets, WorkerSettings
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.task_sources.impossible_probes import probe_of
from durable_rollouts.trainer_client.results_file import file_stem
from durable_rollouts.trainer_client.rollout_runs import rollout_input, run_rollouts, start_rollout
from testbed.headless_chromium import HeadlessChromium
from tests.local_cluster import containers_of_runs, local_cluster
from tests.slime_sample import Sample
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=120, eval_timeout_s=120, guard_s=600)


class Cluster:
    def __init__(self, env: WorkflowEnvironment, settings: WorkerSettings, policy: ScriptedPolicyServer):
        self.env, self.settings, self.policy = env, settings, policy
        self.rows = [row for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)]
        self.run_ids: list[str] = []

    def new_run_id(self) -> str:
        self.run_ids.append(f"t{uuid.uuid4().hex[:6]}")
        return self.run_ids[-1]

    async def run(self, rollouts: list[RolloutInput]):
        return await run_rollouts(self.env.client, rollouts, self.new_run_id(), task_queue=self.settings.task_queue)

    def rollout(self, task, budgets: RolloutBudgets = BUDGETS) -> RolloutInput:
        return rollout_input(task, 0, 0, PolicySpec(sampling=SamplingParams(max_new_tokens=2048)), budgets)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=60
    )
    policy_url = await policy.start()
    # Pulls off: every example image is on the engine, and the missing row is image_not_found without asking Docker Hub.
    async with local_cluster(
        policy_url, tmp_path_factory.mktemp("results"), BUDGETS, images=ImageSettings(pull_policy="never")
    ) as (env, settings):
        yield Cluster(env, settings, policy)
    await policy.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def example_results(cluster):
    """Every example task rolled out once by the oracle (one batch, shared by the tests that read them)."""
    cluster.policy.set_policy(None, "oracle")
    return await cluster.run([cluster.rollout(row.task) for row in cluster.rows])


def sampled_runs(segment):
    runs, start = [], None
    for i, m in enumerate(segment.loss_mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((segment.tokens[start:i], segment.rollout_log_probs[start:i]))
            start = None
    return runs


async def test_oracle_solves_every_example_task_with_exact_token_capture(cluster, example_results):
    results = example_results
    why = [
        (r.instance_id, r.abort_reason, r.agent and r.agent.reason, r.evaluation and r.evaluation.log_tail[-500:])
        for r in results
    ]
    assert [(r.status, r.reward, r.solved, r.applied_cleanly) for r in results] == [
        ("completed", 1.0, True, True)
    ] * len(results), why
    for result in results:
        segments = unpack_trajectory(result.trajectory)
        records = cluster.policy.records_for(result.agent.session_id)
        captured = [run for segment in segments for run in sampled_runs(segment)]
        assert captured == [(r.output_ids, r.output_logprobs) for r in records]
        assert result.agent.reason == "completed" and result.agent.turns == 3
    assert {r.evaluation.grader for r in results} == {"eval_cmd", "swepro", "swebench"}


async def test_impossible_probes_of_every_example_run_the_whole_loop_and_the_oracles_honest_fix_is_held(cluster):
    """Claude Code works in the probe's sandbox (tests in the image flipped at boot), the oracle hands in the
    statement's fix, and the contradicting test fails it: held, reward 0, on every grader kind."""
    cluster.policy.set_policy(None, "oracle")
    probes = [probe_of(row.task, 21) for row in cluster.rows]
    results = await cluster.run([cluster.rollout(task) for task in probes])
    why = [(r.instance_id, r.abort_reason, r.evaluation and r.evaluation.log_tail[-800:]) for r in results]
    assert [(r.status, r.reward, r.applied_cleanly, r.evaluation.probe.verdict) for r in results] == [
        ("completed", 0.0, True, "held")
    ] * 4, why
    assert {r.evaluation.grader for r in results} == {"eval_cmd", "swepro", "swebench"}
    assert all(r.evaluation.probe.flip is not None and r.agent.turns == 3 for r in results)

    cluster.policy.set_policy(None, "noop")
    missing = cluster.rows[0].task.model_copy(
        update={"image": "rollout-task-does-not-exist:latest", "instance_id": "missing"}
    )
    swebench = next(row.task for row in cluster.rows if row.task.grader == "swebench")
    no_spec = swebench.model_copy(
        update={"instance_id": "no-spec", "swebench": swebench.swebench.model_copy(update={"install_config": None})}
    )
    noop, noop_swebench, bad, ungradable = await cluster.run(
        [cluster.rollout(task) for task in (cluster.rows[0].task, swebench, missing, no_spec)]
    )
    for result in (noop, noop_swebench):
        assert (result.status, result.reward, result.solved) == ("completed", 0.0, False)
    assert (
        noop_swebench.evaluation.grader,
        noop_swebench.evaluation.tests_passed,
        noop_swebench.evaluation.tests_failed,
    ) == ("swebench", 3, 3)
    assert (bad.status, bad.abort_reason) == ("aborted", "image_not_found")
    assert (ungradable.status, ungradable.abort_reason, ungradable.agent) == ("aborted", "not_evaluable", None)


async def starter(cluster: Cluster, *arguments: str) -> str:
    """``starter.py`` with ``arguments`` in a subprocess against the cluster's server: its output (exit 0)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "starter.py",
        *arguments,
        env={**os.environ, "TEMPORAL_ADDRESS": cluster.settings.temporal_address},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output = (await process.communicate())[0].decode()
    assert process.returncode == 0, output
    return output


async def show(cluster: Cluster, workflow_id: str, *flags: str) -> list[str]:
    """``starter.py show`` of ``workflow_id``: the lines from its grading summary on."""
    return (await starter(cluster, "show", workflow_id, *flags)).split("--- grading ---\n", 1)[1].splitlines()


async def test_each_example_tasks_page_shows_its_turns_tokens_time_line_and_verdict_in_a_browser(
    cluster, example_results, tmp_path
):
    """``starter.py show WF --html FILE`` for every example rollout, each page opened in headless Chromium."""
    async with HeadlessChromium() as browser:
        for result in example_results:
            page = tmp_path / f"{result.instance_id}.html"
            printed = await starter(cluster, "show", result.workflow_id, "--html", str(page))
            assert f"{result.workflow_id}: COMPLETED; page {page} (" in printed, printed
            segments = unpack_trajectory(result.trajectory)
            await browser.open(page)
            seen = await browser.evaluate(
                "({replies: document.querySelectorAll('.reply').length, tokens: document.querySelectorAll('.toks > "
                "span').length,"
                " stages: [...new Set([...document.querySelectorAll('svg.time-bar rect[class]')].map(r => "
                "r.getAttribute('class')))],"
                " attempts: document.querySelectorAll('#timeline li').length, added: document.querySelectorAll('#patch "
                ".add').length,"
                " grading: document.getElementById('grading').textContent, fates: "
                "[...document.querySelectorAll('.reply-head .badge')].map(b => b.className)})"
            )
            assert seen["replies"] == result.agent.turns == 3 and seen["tokens"] == sum(
                sum(s.loss_mask) for s in segments
            )
            assert {"stage-boot", "stage-agent", "stage-diff", "stage-grading", "stage-merge"} <= set(seen["stages"]), (
                seen["stages"]
            )
            assert seen["attempts"] == 1 and seen["added"] > 0, "one attempt; the patch's added lines marked"
            assert result.evaluation.grader in seen["grading"] and "no evidence" in seen["grading"]
            assert seen["fates"].count("badge trains") == 3, (
                "under today's contract every turn of a 3-turn rollout trains"
            )
        assert browser.network_requests == []


async def test_show_prints_the_grading_summary_and_where_the_logs_are(cluster, tmp_path):
    """The whole grading and agent logs travel in the result; ``starter.py show`` gives their sizes, and with
    ``--save-logs DIR`` writes them there and names the files."""
    cluster.policy.set_policy(None, "oracle")
    calc = next(row.task for row in cluster.rows if row.task.instance_id == "calc-eval-cmd")
    (result,) = await cluster.run([cluster.rollout(calc)])
    assert result.status == "completed" and result.evaluation is not None and result.agent is not None
    grading_log, agent_log = result.evaluation.log, result.agent.log
    assert (result.evaluation.log_path, result.agent.log_path) == ("", ""), "only a results file sets a log path"
    assert len(grading_log.encode()) == result.evaluation.log_bytes
    assert "[apply]\n$ git apply --3way" in grading_log and "[eval_cmd exit 0]" in grading_log
    assert [json.loads(line)["type"] for line in agent_log.splitlines() if line.startswith("{")][-1] == "result", (
        "the whole stream-json log"
    )

    summary = await show(cluster, result.workflow_id)
    assert summary[0] == "grader eval_cmd  patch: applied (git apply --3way)  tests passed 8 failed 0  reward 1.00", (
        summary
    )
    assert summary[1].startswith("8 passed in ")
    assert summary[2] == f"grading log: {result.evaluation.log_bytes:,} bytes in the result (--save-logs DIR writes it)"
    assert summary[3] == f"agent log: {len(agent_log):,} characters in the result (--save-logs DIR writes it)"

    saved = tmp_path / "logs"
    summary = await show(cluster, result.workflow_id, "--save-logs", str(saved))
    grading_file, agent_file = (
        saved / f"{file_stem(result.workflow_id)}.{suffix}" for suffix in ("grading.log", "agent.jsonl")
    )
    assert summary[2] == f"grading log: {grading_file} ({result.evaluation.log_bytes:,} bytes)"
    assert summary[3] == f"agent log: {agent_file}"
    assert grading_file.read_bytes() == grading_log.encode() and agent_file.read_bytes() == agent_log.encode()


async def test_a_hanging_agent_is_stopped_by_its_budget_and_the_rollout_still_returns(cluster, tmp_path):
    cluster.policy.set_policy(None, "slow")
    budgets = RolloutBudgets(agent_budget_s=8, eval_timeout_s=120, guard_s=300)
    (result,) = await cluster.run([cluster.rollout(cluster.rows[0].task, budgets)])
    assert result.agent is not None and result.agent.reason == "agent_budget_exceeded"
    assert result.status == "aborted" and result.abort_reason == "adapter_session_empty"
    assert [r.finish_reason["type"] for r in cluster.policy.records_for(result.agent.session_id)] == ["abort"]

    page = tmp_path / "aborted.html"
    await starter(cluster, "show", result.workflow_id, "--html", str(page))
    async with HeadlessChromium() as browser:
        await browser.open(page)
        seen = await browser.evaluate(
            "({banner: document.querySelector('.banner.aborted').textContent, replies: "
            "document.querySelectorAll('.reply').length,"
            " segments: document.getElementById('segments').textContent, attempts: document.querySelector('#timeline "
            "li').textContent})"
        )
    assert "adapter_session_empty" in seen["banner"] and seen["replies"] == 0, (
        "an aborted rollout's page says why, with no conversation"
    )
    assert (
        "No trajectory: adapter_session_empty" in seen["segments"]
        and "agent ended: agent_budget_exceeded" in seen["attempts"]
    ), seen


async def test_a_slow_rollout_is_visible_to_operators_while_it_runs(cluster, tmp_path):
    cluster.policy.set_policy(None, "slow")
    cluster.policy.delay_s = 4.0
    client = cluster.env.client
    try:
        handle = await start_rollout(
            client, cluster.rollout(cluster.rows[0].task), cluster.new_run_id(), cluster.settings.task_queue
        )
        query = f"RolloutStage='agent' AND WorkflowId='{handle.id}'"
        for _ in range(200):
            if [w async for w in client.list_workflows(query)]:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the running rollout never showed up at stage 'agent'")
        status = await asyncio.create_subprocess_exec(
            sys.executable,
            "starter.py",
            "status",
            "--stale-minutes",
            "0",
            env={**os.environ, "TEMPORAL_ADDRESS": cluster.settings.temporal_address},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        cluster.policy.delay_s = 600
        page = tmp_path / "running.html"
        printed = await starter(cluster, "show", handle.id, "--html", str(page))
        assert f"{handle.id}: RUNNING; page {page}" in printed, printed
        cluster.policy.delay_s = 4.0
        turns_seen = []
        while len(set(turns_seen)) < 3:
            progress = await handle.query(CodingAgentRollout.progress)
            if progress.stage != "agent":
                break
            turns_seen.append(progress.turns)
            await asyncio.sleep(0.5)
        assert turns_seen == sorted(turns_seen) and len(set(turns_seen)) >= 2, turns_seen
        async with HeadlessChromium() as browser:
            await browser.open(page)
            banner = await browser.evaluate("document.querySelector('.banner.running').textContent")
            running = await browser.evaluate(
                "[...document.querySelectorAll('svg.time-bar rect.stage-agent title')].map(t => t.textContent)"
            )
        assert "still running" in banner and any("(running" in title for title in running), (banner, running)
        output = (await status.communicate())[0].decode()
        assert status.returncode == 0 and handle.id in output, output
        result = await handle.result()
        assert result.status == "completed" and result.reward == 1.0
    finally:
        cluster.policy.delay_s = 60


async def test_slime_generate_runs_the_example_tasks_into_todays_slime_samples(cluster, monkeypatch):
    cluster.policy.set_policy(None, "oracle")
    monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "current")
    monkeypatch.setenv("TEMPORAL_ADDRESS", cluster.settings.temporal_address)
    monkeypatch.setenv("ROLLOUT_TASK_QUEUE", cluster.settings.task_queue)
    monkeypatch.setattr(slime_generate, "RUN_ID", cluster.new_run_id())
    args = SimpleNamespace(
        sglang_router_ip=None,
        sglang_router_port=None,
        rollout_max_context_len=65536,
        hf_checkpoint=str(ensure_qwen_tokenizer()),
    )
    rows = [json.loads(line) for line in EXAMPLE_DATASET.read_text().splitlines() if line.strip()]
    samples = [
        Sample(index=i, group_index=i, prompt=r["prompt"], label=r.get("label"), metadata=r["metadata"])
        for i, r in enumerate(rows)
    ]
    no_image = Sample(index=99, group_index=99, prompt="p", metadata={"workdir": "/w", "eval_cmd": "true"})
    outputs = await asyncio.gather(
        *(slime_generate.generate(args, s, {"temperature": 1.0, "max_new_tokens": 2048}) for s in [*samples, no_image])
    )
    for sample, fanned in zip(samples, outputs, strict=False):  # outputs has one more: no_image
        assert all(s is not sample for s in fanned) and {(s.rollout_id, s.group_index, s.prompt) for s in fanned} == {
            (sample.index, sample.index, sample.prompt)
        }
        assert all(s.status is Sample.Status.COMPLETED and s.reward == 1.0 for s in fanned)
        assert all(
            s.metadata["grading_solved"] and s.metadata["use_tool"] and s.metadata["agent_exit_code"] == 0
            for s in fanned
        )
        for s in fanned:
            assert len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length < len(s.tokens)
            assert sum(s.loss_mask) > 0 and "<tool_call>" in s.response
    (aborted,) = outputs[-1]
    assert aborted.status is Sample.Status.ABORTED and aborted.metadata["abort_reason"] == "missing_image_or_workdir"
    assert aborted.remove_sample, "today's slime leaves an aborted sample out of the loss"


async def test_no_labelled_container_is_left_behind(cluster):
    assert cluster.run_ids and await containers_of_runs(cluster.run_ids) == []
