"""A real engine and a real model in the loop (issue 47): vLLM's CPU build serving SmolLM2-135M-Instruct behind a
recording proxy, the real Claude Code in Docker sandboxes, a Temporal dev server and the worker's adapter.

The worker names no policy server: every rollout's ``PolicySpec`` carries the URL and ``engine="vllm"``, the
trainer's side of the choice. SmolLM2 is no agent (rewards are 0); what is checked is every trained token: equal
to what the engine returned (the proxy's record), and within 1e-3 of the trainer's own log-prob for its version
(``durable_rollouts.logprob_check``), across an abort in the middle of a reply and a weight update in the middle
of one. Faults: the engine down, the engine dying mid-turn, the wrong engine for the URL.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import outcome_of
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SamplingParams, StalenessBound
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input, run_rollouts, start_rollout
from durable_rollouts.vllm_engine.local_engine import SMOLLM2, LocalEngine
from durable_rollouts.vllm_engine.weight_updates import update_weights
from tests.engine_proxy import RecordingProxy
from tests.killed_workers import sampled_runs
from tests.local_cluster import containers_of_runs, local_cluster
from tests.real_engine import logprob_check, mid_reply, perturbed_checkpoint, require_engine, write_samples

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=420, eval_timeout_s=120, guard_s=900)
# SmolLM2's window; short replies keep a CPU decode (12–21 tokens/s) to seconds per turn.
CONTEXT = 8192
REPLY_TOKENS = 48


class Cluster:
    def __init__(self, env, settings, engine: LocalEngine, proxy: RecordingProxy, http: aiohttp.ClientSession):
        self.env, self.settings, self.engine, self.proxy, self.http = env, settings, engine, proxy, http
        self.rows = [row for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)]
        self.run_ids: list[str] = []

    def new_run_id(self) -> str:
        self.run_ids.append(f"e{uuid.uuid4().hex[:6]}")
        return self.run_ids[-1]

    def rollout(
        self, task, policy_url: str | None = None, engine: str = "vllm", reply_tokens: int = REPLY_TOKENS, **spec
    ) -> RolloutInput:
        policy = PolicySpec(
            policy_url=policy_url or self.proxy.url,
            engine=engine,
            context_budget=CONTEXT,
            sampling=SamplingParams(temperature=1.0, max_new_tokens=reply_tokens),
            **spec,
        )
        return rollout_input(task, 0, 0, policy, BUDGETS)

    async def run(self, rollouts: list[RolloutInput]) -> list[RolloutResult]:
        return await run_rollouts(self.env.client, rollouts, self.new_run_id(), task_queue=self.settings.task_queue)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def engine(tmp_path_factory) -> AsyncIterator[tuple[LocalEngine, RecordingProxy]]:
    """The module's engine and the recording proxy before it."""
    require_engine()
    engine = LocalEngine(log_path=tmp_path_factory.mktemp("engine") / "vllm.log")
    await engine.start()
    proxy = RecordingProxy(engine.url)
    await proxy.start()
    try:
        yield engine, proxy
    finally:
        await proxy.stop()
        await engine.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(engine, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    # Claude Code gives up on a failing policy after two retries, so a dead engine ends a run in seconds.
    overrides = {
        "tokenizer_dir": SMOLLM2,
        "images": ImageSettings(pull_policy="never"),
        "claude_extra_env": {"CLAUDE_CODE_MAX_RETRIES": "2"},
    }
    async with aiohttp.ClientSession() as http, local_cluster(None, results, BUDGETS, **overrides) as (env, settings):
        cluster = Cluster(env, settings, *engine, http)
        yield cluster
        assert await containers_of_runs(cluster.run_ids) == []


def trained_runs(result: RolloutResult) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    return sampled_runs(unpack_trajectory(result.trajectory))


def engine_runs(cluster: Cluster, result: RolloutResult) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    """What the engine sampled for the session, a turn's continued pieces (``<rid>``, ``<rid>-c1``, …) joined."""
    turns: dict[str, tuple[list[int], list[float]]] = {}
    for exchange in cluster.proxy.of_session(result.agent.session_id):
        ids, log_probs = turns.setdefault(re.sub(r"-c\d+$", "", exchange.request_id), ([], []))
        ids += exchange.output_ids
        log_probs += exchange.log_probs
    return [(tuple(ids), tuple(log_probs)) for ids, log_probs in turns.values() if ids]


async def run_one(cluster: Cluster, rollout: RolloutInput, during) -> RolloutResult:
    """Start ``rollout``, run ``during()`` while it runs (it returns once it has acted), then wait for its result."""
    handle = await start_rollout(
        cluster.env.client, rollout, cluster.new_run_id(), task_queue=cluster.settings.task_queue
    )
    await asyncio.wait_for(during(), 600)
    return await handle.result()


async def test_rollouts_of_the_example_tasks_train_exactly_what_the_engine_sampled(cluster, tmp_path):
    results = await cluster.run([cluster.rollout(row.task) for row in cluster.rows])
    why = [(r.instance_id, r.status, r.abort_reason, r.agent and r.agent.reason) for r in results]
    assert [r.status for r in results] == ["completed"] * len(results), why
    for result in results:
        assert result.agent.turns >= 1 and result.trajectory is not None
        assert trained_runs(result) == engine_runs(cluster, result), (
            "every trained token is one the engine returned, with its log-prob"
        )
    code, text, report = logprob_check(write_samples(results, tmp_path / "samples.jsonl"), {"default": SMOLLM2})
    print(text)
    assert (
        code == 0
        and report["over"] == 0
        and report["tokens"] == sum(len(ids) for r in results for ids, _ in trained_runs(r))
    ), text


async def test_an_abort_in_the_middle_of_a_reply_is_continued_and_the_stitched_reply_checks_out(cluster, tmp_path):
    aborted: list[str] = []

    async def abort_mid_reply() -> None:
        rid = await mid_reply(cluster.http, cluster.proxy, cluster.engine.url)
        async with cluster.http.post(
            f"{cluster.proxy.url}/inference/v1/abort_requests", json={"request_ids": [f"generate-tokens-{rid}"]}
        ) as response:
            assert response.status == 200
        aborted.append(rid)

    result = await run_one(cluster, cluster.rollout(cluster.rows[0].task, reply_tokens=96), abort_mid_reply)
    assert (result.status, result.agent.aborts_continued) == ("completed", 1), (
        result.abort_reason,
        result.agent and result.agent.reason,
    )
    first, second = [e for e in cluster.proxy.exchanges if e.request_id in (aborted[0], f"{aborted[0]}-c1")]
    assert first.reply["finish_reason"] == "abort" and first.output_ids, (
        "the engine ended the first piece with what it had sampled"
    )
    assert second.token_ids == first.token_ids + first.output_ids, (
        "the continuation's prompt is the prompt and the sampled tokens, ids"
    )
    assert second.sampling_params["max_tokens"] == first.sampling_params["max_tokens"] - len(first.output_ids)
    assert trained_runs(result) == engine_runs(cluster, result), "the stitched reply is the two pieces, token by token"
    code, text, _ = logprob_check(write_samples([result], tmp_path / "samples.jsonl"), {"default": SMOLLM2})
    print(text)
    assert code == 0, text


async def test_a_weight_update_in_the_middle_of_a_reply_lands_each_version_on_its_own_tokens(cluster, tmp_path):
    perturbed = perturbed_checkpoint(tmp_path / "step-1")

    async def update_mid_reply() -> None:
        await mid_reply(cluster.http, cluster.proxy, cluster.engine.url)
        await update_weights(cluster.http, cluster.engine.url, perturbed, "step-1")

    # A staleness bound the merge judges against the engine's version then (read from /weight_info): one behind is kept.
    bound = StalenessBound(max_staleness=1, order=["default", "step-1"])
    try:
        result = await run_one(
            cluster, cluster.rollout(cluster.rows[0].task, reply_tokens=96, staleness=bound), update_mid_reply
        )
    finally:
        await update_weights(cluster.http, cluster.engine.url, SMOLLM2, "default")
    assert result.status == "completed", (result.abort_reason, result.agent and result.agent.reason)
    assert (result.staleness.current_version, result.staleness.masked_tokens) == ("step-1", 0), result.staleness
    versions = [
        v
        for segment in unpack_trajectory(result.trajectory)
        for v, m in zip(segment.token_weight_versions(), segment.loss_mask, strict=True)
        if m
    ]
    assert "default" in versions and "step-1" in versions, "a reply ran across the update: tokens of both versions"
    assert trained_runs(result) == engine_runs(cluster, result)
    samples = write_samples([result], tmp_path / "samples.jsonl")
    code, text, _ = logprob_check(samples, {"default": SMOLLM2, "step-1": perturbed})
    print(text)
    assert code == 0, text
    # The same tokens checked with step-1 assigned to the old checkpoint: the check sees it at once.
    code, text, report = logprob_check(samples, {"default": SMOLLM2, "step-1": SMOLLM2})
    print(text)
    assert code == 1 and report["first_offender"]["version"] == "step-1" and report["max_abs_delta"] > 0.05, text
    assert [v["max_abs_delta"] < 1e-3 for v in report["by_version"]] == [
        v["version"] == "default" for v in report["by_version"]
    ], text


async def test_the_wrong_engine_for_the_url_fails_the_first_turn_with_one_line_naming_both(cluster, caplog):
    caplog.set_level(logging.WARNING, logger="durable_rollouts.policy.adapter_server")
    [result] = await cluster.run([cluster.rollout(cluster.rows[0].task, engine="sglang")])
    assert (result.status, result.abort_reason, outcome_of(result)) == ("aborted", "policy_error", "infrastructure")
    lines = [r.getMessage() for r in caplog.records if "does not speak sglang's protocol" in r.getMessage()]
    assert lines and cluster.proxy.url in lines[0] and "choose engine 'vllm'" in lines[0], [
        r.getMessage() for r in caplog.records
    ]


async def test_an_engine_that_is_down_is_an_infrastructure_failure_never_a_sample(cluster):
    dead = f"http://127.0.0.1:{free_port()}"
    [result] = await cluster.run([cluster.rollout(cluster.rows[0].task, policy_url=dead)])
    assert (result.status, result.abort_reason, outcome_of(result)) == ("aborted", "policy_error", "infrastructure")


async def test_the_engine_dying_in_the_middle_of_a_turn_is_an_infrastructure_failure_and_it_comes_back(cluster):
    async def kill_mid_reply() -> None:
        await mid_reply(cluster.http, cluster.proxy, cluster.engine.url)
        await cluster.engine.kill()

    try:
        result = await run_one(cluster, cluster.rollout(cluster.rows[0].task, reply_tokens=96), kill_mid_reply)
    finally:
        await cluster.engine.start()
    assert (result.status, result.abort_reason, outcome_of(result)) == ("aborted", "policy_error", "infrastructure")
    [again] = await cluster.run([cluster.rollout(cluster.rows[0].task)])
    assert again.status == "completed", "the refill's rollout, on the restarted engine, is a sample again"


async def test_a_worker_killed_mid_reply_comes_back_with_its_session_and_no_token_is_lost_or_trained_twice(
    engine, cluster, task, tmp_path
):
    """SIGKILL the worker while the engine samples the session's reply; the worker restarted under the same host id
    takes the spooled session back, aborts the orphaned request upstream, and the agent's retry goes on."""
    _, proxy = engine
    server = DevServer(free_port(), free_port(), tmp_path / "temporal.db", ui=False)
    await server.start()
    queue, host_id, port = f"re-{uuid.uuid4().hex[:6]}", f"re-{uuid.uuid4().hex[:6]}", free_port()
    args = ["--host-id", host_id, "--adapter-port", str(port)]
    env = {
        "ROLLOUT_TOKENIZER_DIR": str(SMOLLM2),
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(tmp_path),
        "ROLLOUT_REAP_INTERVAL_S": "2",
    }
    try:
        client = await connect(server.address)
        handle = await start_rollout(client, cluster.rollout(task, reply_tokens=96), cluster.new_run_id(), queue)
        async with worker_process(server.address, args, env=env) as doomed:
            killed = await asyncio.wait_for(mid_reply(cluster.http, proxy, cluster.engine.url), 600)
            os.killpg(doomed.pid, signal.SIGKILL)
        async with worker_process(server.address, args, env=env):
            result = await asyncio.wait_for(handle.result(), 900)
    finally:
        await server.kill()
    assert (result.status, result.attempts, result.discarded) == ("completed", 1, []), result
    assert result.agent.interruptions == 1, result.agent
    runs = trained_runs(result)
    assert len(runs) == len(set(runs)) == result.agent.turns, "every turn once: none lost, none trained twice"
    assert set(runs) <= set(engine_runs(cluster, result)), "every trained token is one the engine sampled"
    orphan = next(exchange for exchange in proxy.exchanges if exchange.request_id == killed)
    assert orphan.reply is None or (tuple(orphan.output_ids), tuple(orphan.log_probs)) not in runs, (
        "the reply in flight at the kill is not trained"
    )
