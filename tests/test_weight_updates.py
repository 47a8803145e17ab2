"""Weight updates during rollouts, for real (issue 12's acceptance): Temporal dev server, in-process worker,
Docker sandboxes, the real Claude Code binary, and the scripted policy server as the SGLang stand-in.

While oracle rollouts run, a driver pauses the policy server mid-generation (``abort``, ``retract`` or
``in_place``), updates its weight version and resumes it, at least three times per mode. Every rollout must
still earn reward 1.0 with Claude Code never seeing an API error or retrying, and every sampled token in the
stored trajectory must carry exactly the version the server stamped on it. An ``abort`` is lived through by
continuing the generation from what it sampled (``durable_rollouts.policy.continuation``): a pause far longer than
Claude Code's retry ladder loses nothing, while the old behaviour (``continue_after_abort=False``) fails the turn.

The driver synchronises on the server's own state (a running generation has sampled tokens since the last
update), never on sleeps.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import outcome_of
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.rollout_runs import rollout_input, run_rollouts
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=900)
UPDATES_PER_MODE = 3
TOKENS_BETWEEN_UPDATES = 4  # a pause lands only once a running generation sampled this many tokens since the last one
DELAY_S = 3.0  # the slow oracle spreads each answer over this long, so a pause lands mid-generation
HOLD_S = 4.0  # an abort-mode pause held this long: far past a 0-retry ladder (one error ends the agent)


class Cluster:
    def __init__(self, env, settings, policy: ScriptedPolicyServer):
        self.env, self.settings, self.policy = env, settings, policy
        self.rows = [row for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)]
        self.run_ids: list[str] = []
        self.version = 0

    async def run(self, tasks, continue_after_abort: bool = True) -> list[RolloutResult]:
        run_id = f"w{uuid.uuid4().hex[:6]}"
        self.run_ids.append(run_id)
        policy = PolicySpec(sampling=SamplingParams(max_new_tokens=2048), continue_after_abort=continue_after_abort)
        rollouts = [rollout_input(task, 0, 0, policy, BUDGETS) for task in tasks]
        return await run_rollouts(self.env.client, rollouts, run_id, task_queue=self.settings.task_queue)

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)


@asynccontextmanager
async def running_cluster(renderer, results: Path, reap_prefix, **worker_overrides) -> AsyncIterator[Cluster]:
    """A dev server and in-process worker behind a slow scripted oracle; the runs' containers are reaped after."""
    policy = ScriptedPolicyServer(
        renderer, default_policy="slow", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=DELAY_S
    )
    policy.url = await policy.start()
    try:
        async with local_cluster(policy.url, results, BUDGETS, **worker_overrides) as (env, settings):
            cluster = Cluster(env, settings, policy)
            yield cluster
            for run_id in cluster.run_ids:
                await reap_prefix(f"rollout-{run_id}-")
    finally:
        await policy.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(task_images, renderer, tmp_path_factory, reap_prefix):
    """Claude Code with its default ladder (10 retries): a retry would survive, so the test can see there was none."""
    async with running_cluster(renderer, tmp_path_factory.mktemp("results"), reap_prefix) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def short_ladder(task_images, renderer, tmp_path_factory, reap_prefix):
    """Claude Code with no retries at all: any API error ends the agent."""
    extra = {"CLAUDE_CODE_MAX_RETRIES": "0"}
    async with running_cluster(
        renderer, tmp_path_factory.mktemp("results"), reap_prefix, claude_extra_env=extra
    ) as running:
        yield running


async def post(http: aiohttp.ClientSession, url: str, body: dict) -> dict:
    async with http.post(url, json=body) as response:
        payload = await response.json()
        assert response.status == 200, payload
        return payload


async def until(predicate: Callable[[], bool], done: asyncio.Future | None = None) -> bool:
    """Poll the server's state until ``predicate`` holds (True) or ``done`` finished first (False)."""
    while not predicate():
        if done is not None and done.done():
            return False
        await asyncio.sleep(0.02)
    return True


def sampled_since(policy: ScriptedPolicyServer, marks: dict[str, int]) -> bool:
    """A running generation has sampled ``TOKENS_BETWEEN_UPDATES`` tokens since ``marks`` (rid -> count then)."""
    return any(len(g.output_ids) - marks.get(g.rid, 0) >= TOKENS_BETWEEN_UPDATES for g in policy.control.live)


async def update_weights(
    cluster: Cluster, http: aiohttp.ClientSession, mode: str, n: int, hold: Callable[[], asyncio.Future] | None = None
):
    """Pause in ``mode``, set a new version (alternating the two endpoints), resume; returns the version."""
    url, version = cluster.policy.url, cluster.next_version()
    await post(http, f"{url}/pause_generation", {"mode": mode})
    if hold is not None:
        await hold()
    if n % 2 == 0:
        body = {"model_path": f"/ckpt/step-{version}", "weight_version": version}
        if mode == "in_place":
            body["flush_cache"] = False  # sglang refuses a flush with requests still in the running batch
        await post(http, f"{url}/update_weights_from_disk", body)
    else:
        await post(http, f"{url}/update_weight_version", {"new_version": version, "abort_all_requests": False})
    async with http.get(f"{url}/get_model_info") as response:
        assert (await response.json())["weight_version"] == version
    await post(http, f"{url}/continue_generation", {})
    return version


async def drive(cluster: Cluster, mode: str, updates: int, rollouts: asyncio.Future, hold=None) -> list[str]:
    """Up to ``updates`` weight updates, each once a running generation has sampled tokens since the last."""
    versions: list[str] = []
    marks: dict[str, int] = {}
    async with aiohttp.ClientSession() as http:
        while len(versions) < updates:
            if not await until(lambda marks=marks: sampled_since(cluster.policy, marks), rollouts):
                break
            live = cluster.policy.control.live
            versions.append(await update_weights(cluster, http, mode, len(versions), hold))
            marks = {g.rid: len(g.output_ids) for g in live}
    return versions


def agent_events(result: RolloutResult) -> list[dict]:
    """The events of the agent's whole stream-json log, which travels in its result; it always ends with a
    ``result``."""
    events = [json.loads(line) for line in result.agent.log.splitlines() if line.startswith("{")]
    assert any(e.get("type") == "result" for e in events), (
        f"no result event in the agent's log: {result.agent.log[-2000:]!r}"
    )
    return events


def api_trouble(events: list[dict]) -> list[dict]:
    """Retries, API-error results and API-error messages in a Claude Code stream-json log."""
    return [
        e
        for e in events
        if (e.get("type") == "system" and e.get("subtype") == "api_retry")
        or (e.get("type") == "result" and (e.get("is_error") or e.get("api_error_status")))
        or (e.get("type") == "assistant" and (e.get("error") or e.get("isApiErrorMessage")))
    ]


def check_versions_token_by_token(cluster: Cluster, result: RolloutResult) -> list[str]:
    """The trajectory's sampled tokens, log-probs and versions are the server's, token by token; returns the
    versions."""
    segments = unpack_trajectory(result.trajectory)
    stored = [
        (token, log_prob, version)
        for segment in segments
        for token, mask, log_prob, version in zip(
            segment.tokens, segment.loss_mask, segment.rollout_log_probs, segment.token_weight_versions(), strict=True
        )
        if mask
    ]
    records = cluster.policy.records_for(result.agent.session_id)
    served = [
        (token, log_prob, version)
        for record in records
        for token, log_prob, version in zip(
            record.output_ids, record.output_logprobs, record.output_versions, strict=True
        )
    ]
    assert stored == served
    return [version for _, _, version in stored]


@pytest.mark.parametrize("mode", ["abort", "retract", "in_place"])
async def test_rollouts_live_through_weight_updates_in_every_pause_mode(cluster, mode):
    tasks = [row.task for row in cluster.rows]
    first_version = str(cluster.version)
    rollouts = asyncio.ensure_future(cluster.run(tasks))
    versions = await drive(cluster, mode, UPDATES_PER_MODE, rollouts)
    results = await rollouts
    assert len(versions) >= UPDATES_PER_MODE, f"only {len(versions)} updates landed mid-generation"

    assert [(r.status, r.reward, r.agent.reason) for r in results] == [("completed", 1.0, "completed")] * len(tasks)
    for result in results:
        assert api_trouble(agent_events(result)) == []
        assert result.agent.turns == 3
    per_token = [check_versions_token_by_token(cluster, result) for result in results]
    seen = {v for vs in per_token for v in vs}
    assert seen <= {"default" if first_version == "0" else first_version, *versions} and len(seen) > 1
    assert any(r.weight_version_changes >= 1 for r in results), "no trajectory spans more than one version"

    aborts = [r.agent.aborts_continued for r in results]
    records = [record for r in results for record in cluster.policy.records_for(r.agent.session_id)]
    if mode == "abort":
        assert any(aborts) and sum(aborts) == sum(record.finish_reason["type"] == "abort" for record in records)
    else:
        # a held pause aborts nothing: one generation spans the versions
        assert not any(aborts) and len(records) == sum(r.agent.turns for r in results)
        assert any(len(set(record.output_versions)) > 1 for record in records)


async def first_generation_begun(cluster: Cluster, rollouts: asyncio.Future) -> None:
    """Until the rollout's first generation is running with a token sampled: the patch is not applied yet, and the
    adapter has not opened its stream (its first keep-alive is 5 s away), so a failed turn is an HTTP 529 that
    Claude Code can only retry, not an SSE error it would answer with a non-streaming fallback."""
    assert await until(lambda: any(g.output_ids for g in cluster.policy.control.live), rollouts)


async def test_an_abort_pause_longer_than_the_retry_ladder_loses_nothing(short_ladder):
    """With no retries, one error would end the agent; a held abort-mode pause is lived through all the same."""
    task = short_ladder.rows[0].task
    rollouts = asyncio.ensure_future(short_ladder.run([task]))
    await first_generation_begun(short_ladder, rollouts)
    async with aiohttp.ClientSession() as http:
        held = asyncio.Event()

        async def hold():
            # the aborted generation has been resubmitted and is waiting for admission while paused
            await until(lambda: short_ladder.policy.control.waiting >= 1, rollouts)
            await asyncio.sleep(HOLD_S)
            held.set()

        await update_weights(short_ladder, http, "abort", 0, hold)
    (result,) = await rollouts
    assert held.is_set()
    assert (result.status, result.reward, result.agent.reason) == ("completed", 1.0, "completed")
    assert api_trouble(agent_events(result)) == []
    assert result.agent.aborts_continued == 1
    assert len(set(check_versions_token_by_token(short_ladder, result))) == 2


async def test_without_continuation_the_same_pause_fails_the_turn(short_ladder):
    """The control: the rollout's ``PolicySpec(continue_after_abort=False)``, the old fail-the-turn behaviour. The
    agent gives up on the aborted turn (a 529, no retry left), and because the policy server failed its last call the
    rollout ends as the infrastructure's failure (``policy_error``, refilled in a group), never as a zero reward."""
    task = short_ladder.rows[0].task
    rollouts = asyncio.ensure_future(short_ladder.run([task], continue_after_abort=False))
    await first_generation_begun(short_ladder, rollouts)
    async with aiohttp.ClientSession() as http:
        await update_weights(short_ladder, http, "abort", 0)
    (result,) = await rollouts
    assert (result.status, result.abort_reason, outcome_of(result)) == ("aborted", "policy_error", "infrastructure"), (
        result
    )
    assert result.reward == 0.0


async def test_no_labelled_container_is_left_behind(cluster, short_ladder):
    assert await containers_of_runs(cluster.run_ids + short_ladder.run_ids) == []
