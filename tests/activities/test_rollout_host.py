"""Agent-slot admission: pick_host reserves a slot per workflow, so boots in flight count too; slots do not leak.

A boot that fails for good gives its slot back at once (one cancelled for a lost
heartbeat is retried and keeps it); sessions restored from the spool hold no slot
until an agent activity claims them, while a session let go by a cancelled agent
activity keeps its slot for the retry.
"""

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import uuid

import docker
import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from activities import activity_failure_log
from activities import rollout_host as rollout_host_module
from activities.rollout_host import RolloutHost
from durable_rollouts.claude_code import agent_wait
from durable_rollouts.claude_code.binary import find_claude_code
from durable_rollouts.contracts.agent_runs import AgentRunRequest
from durable_rollouts.contracts.image_prefetch import PrefetchRequest
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.sandboxes import PickRequest, SandboxRequest
from durable_rollouts.contracts.session import PolicySpec, SessionConfig
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import container_layout
from durable_rollouts.docker_sandbox import firewall as sandbox_firewall
from durable_rollouts.docker_sandbox.errors import DetachedLaunchFailed, SandboxError
from durable_rollouts.docker_sandbox.host_placement import IMAGE_AFFINITY_ATTEMPTS, PREFETCH_PULLS_PER_HOST
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.search_attribute_registry import ensure_search_attributes
from testbed.call_counts import CountingSandboxes
from tests.local_cluster import start_dev_server
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = pytest.mark.asyncio(loop_scope="session")
CONFIG = SessionConfig(policy_url="http://127.0.0.1:1")


ANY_IMAGE = PickRequest(image="rollout-task-calc-eval-cmd:latest")


def host(
    adapter: AdapterServer,
    slots: int,
    host_queue: str = "rl-rollouts-host-test",
    images: ImageSettings | None = None,
    image_affinity: bool = False,
) -> RolloutHost:
    """A host whose ``pick_host`` weighs slots only, unless ``image_affinity``."""
    return RolloutHost(
        sandboxes=DockerSandboxes(
            SandboxSettings(host_queue=host_queue, lifetime_s=600, images=images or ImageSettings())
        ),
        adapter=adapter,
        host_queue=host_queue,
        adapter_public_url="http://127.0.0.1:1",
        default_policy_url="http://127.0.0.1:2",
        agent_slots=slots,
        image_affinity=image_affinity,
    )


def as_workflow(workflow_id: str, refusals: int | None = None) -> ActivityEnvironment:
    """An activity environment of ``workflow_id``'s activity; ``refusals``: the heartbeat details an earlier
    attempt of ``pick_host`` left (the image refusals so far)."""
    env = ActivityEnvironment()
    details = [] if refusals is None else [refusals]
    env.info = dataclasses.replace(
        ActivityEnvironment.default_info(), workflow_id=workflow_id, heartbeat_details=details
    )
    return env


async def test_slots_are_reserved_at_pick_time(renderer):
    rollout_host = host(AdapterServer(renderer), slots=2)
    assert await as_workflow("wf-a").run(rollout_host.pick_host, ANY_IMAGE) == "rl-rollouts-host-test"
    assert await as_workflow("wf-b").run(rollout_host.pick_host, ANY_IMAGE) == "rl-rollouts-host-test"
    assert await as_workflow("wf-a").run(rollout_host.pick_host, ANY_IMAGE) == "rl-rollouts-host-test", (
        "a retry keeps its slot"
    )
    with pytest.raises(ApplicationError) as refused:
        await as_workflow("wf-c").run(rollout_host.pick_host, ANY_IMAGE)
    assert refused.value.type == "HostFull"


async def test_a_host_without_the_image_leaves_the_first_attempts_to_a_host_that_holds_it(renderer):
    """Two hosts, each holding one of two images: each takes its own image's rollout at once and refuses the
    other's (``ImageElsewhere``) until ``IMAGE_AFFINITY_ATTEMPTS`` refusals are counted, then takes it (and
    would pull); ``HostFull`` refusals do not count; a holder that is full refuses as ``HostFull``, so the
    rollout goes to the other host after the image refusals."""
    hosts = {
        name: host(AdapterServer(renderer), slots=2, host_queue=f"host-{name}", image_affinity=True) for name in "ab"
    }
    images = {name: PickRequest(image=f"rollout-task-{name}:latest") for name in "ab"}
    for name, rollout_host in hosts.items():
        rollout_host.sandboxes.image_cache.held(images[name].image)
    assert await as_workflow("wf-a").run(hosts["a"].pick_host, images["a"]) == "host-a"
    for refusals in range(IMAGE_AFFINITY_ATTEMPTS):
        env = as_workflow("wf-b", refusals)
        beats: list = []
        env.on_heartbeat = beats.append
        with pytest.raises(ApplicationError) as refused:
            await env.run(hosts["a"].pick_host, images["b"])
        assert (refused.value.type, refused.value.non_retryable, beats) == ("ImageElsewhere", False, [refusals + 1])
    assert await as_workflow("wf-a1").run(hosts["a"].pick_host, images["a"]) == "host-a"
    with pytest.raises(ApplicationError) as full:
        await as_workflow("wf-a2").run(hosts["a"].pick_host, images["a"])
    assert full.value.type == "HostFull", "a full holder leaves its image's next rollout to another host"
    assert await as_workflow("wf-a2", IMAGE_AFFINITY_ATTEMPTS).run(hosts["b"].pick_host, images["a"]) == "host-b"
    assert hosts["b"].sandboxes.image_cache.holds("docker.io/library/rollout-task-b"), "any spelling of the name"


async def test_a_prefetch_is_refused_where_the_image_is_not_while_the_host_pulls_its_share_and_skipped_with_pulls_off(
    renderer,
):
    """``prefetch_image``: a host that holds the image answers ``held`` at once, even while it pulls its share of
    others; one that lacks it refuses (``ImageElsewhere``, counted like ``pick_host``'s), then, past those
    refusals, while it pulls its share (``PullsBusy``), both retryable; under ``ROLLOUT_PULL_POLICY=never`` a host
    past the refusals skips it."""
    holder = host(AdapterServer(renderer), slots=2, host_queue="host-a", image_affinity=True)
    holder.sandboxes.image_cache.held("rollout-task-a:latest")
    done = await as_workflow("prefetch-1").run(
        holder.prefetch_image, PrefetchRequest(image="docker.io/library/rollout-task-a")
    )
    assert (done.outcome, done.host_queue) == ("held", "host-a")
    with pytest.raises(ApplicationError) as elsewhere:
        await as_workflow("prefetch-1").run(holder.prefetch_image, PrefetchRequest(image="rollout-task-b:latest"))
    assert (elsewhere.value.type, elsewhere.value.non_retryable) == ("ImageElsewhere", False)
    holder._prefetching = PREFETCH_PULLS_PER_HOST
    with pytest.raises(ApplicationError) as busy:
        await as_workflow("prefetch-1", IMAGE_AFFINITY_ATTEMPTS).run(
            holder.prefetch_image, PrefetchRequest(image="rollout-task-b:latest")
        )
    assert (busy.value.type, busy.value.non_retryable) == ("PullsBusy", False)
    held = await as_workflow("prefetch-2").run(holder.prefetch_image, PrefetchRequest(image="rollout-task-a:latest"))
    assert held.outcome == "held", "a busy host that holds the image still answers at once"
    pulls_off = host(AdapterServer(renderer), slots=2, images=ImageSettings(pull_policy="never"), image_affinity=True)
    skipped = await as_workflow("prefetch-1", IMAGE_AFFINITY_ATTEMPTS).run(
        pulls_off.prefetch_image, PrefetchRequest(image="rollout-task-b:latest")
    )
    assert skipped.outcome == "skipped"


async def test_restored_sessions_hold_no_slot_until_an_agent_claims_them(renderer, tmp_path):
    before = AdapterServer(renderer, spool=SessionSpool(tmp_path / "spool"))
    await before.start()
    kept, gone = before.registry.open_session(CONFIG), before.registry.open_session(CONFIG)
    await before.stop()
    after = AdapterServer(renderer, spool=SessionSpool(tmp_path / "spool"))
    await after.start()
    try:
        registry = after.registry
        assert sorted(registry.restore_spooled()) == sorted([kept.session_id, gone.session_id])
        assert registry.live_count == 0
        rollout_host = host(after, slots=1)
        assert await as_workflow("wf-new").run(rollout_host.pick_host, ANY_IMAGE) == "rl-rollouts-host-test", (
            "restored sessions must not fill the host"
        )
        assert registry.claim(kept.session_id) is not None and registry.live_count == 1
        assert registry.held_by(kept.session_id, 0) and registry.claim(kept.session_id, 2) is not None
        assert not registry.held_by(kept.session_id, 0), (
            "a retry's claim wins: the attempt it superseded no longer holds the session"
        )
        registry.unclaim(kept.session_id)
        assert not registry.held_by(kept.session_id, 2)
        assert registry.live_count == 1, (
            "a session let go by its activity keeps its slot: its agent runs on and its retry is coming"
        )
        assert await registry.forget_unclaimed(older_than_s=3600) == [], "not yet past the grace period"
        assert await registry.forget_unclaimed() == sorted([kept.session_id, gone.session_id])
        assert registry.get(kept.session_id) is None and list((tmp_path / "spool").glob("*.jsonl")) == []
    finally:
        await after.stop()


def bad_row(image: str) -> RolloutInput:
    task = TaskSpec(
        instance_id=f"bad-{uuid.uuid4().hex[:6]}", image=image, workdir="/w", problem_statement="p", eval_cmd="true"
    )
    return RolloutInput(task=task, host_start_timeout_s=5, guard_s=120)


async def test_the_image_refusals_carry_over_between_attempts_on_a_real_server(renderer):
    """A real dev server: a host that lacks the image refuses ``IMAGE_AFFINITY_ATTEMPTS`` attempts of
    ``pick_host``, their count carried over by the attempts' heartbeat details, and takes the next one."""
    env = await start_dev_server()
    await ensure_search_attributes(env.client, "default")
    adapter = AdapterServer(renderer)
    await adapter.start()
    shared, host_queue = f"affinity-{uuid.uuid4().hex[:6]}", f"affinity-host-{uuid.uuid4().hex[:6]}"
    rollout_host = host(
        adapter, slots=1, host_queue=host_queue, images=ImageSettings(pull_policy="never"), image_affinity=True
    )
    try:
        async with (
            Worker(env.client, task_queue=shared, workflows=[CodingAgentRollout], activities=[rollout_host.pick_host]),
            Worker(env.client, task_queue=host_queue, activities=[rollout_host.boot_sandbox]),
        ):
            handle = await env.client.start_workflow(
                CodingAgentRollout.run,
                bad_row("rollout-task-nowhere:latest"),
                id=f"wf-{uuid.uuid4().hex[:8]}",
                task_queue=shared,
            )
            result = await handle.result()
        history = await handle.fetch_history()
    finally:
        await adapter.stop()
        await env.shutdown()
    assert (result.status, result.abort_reason) == ("aborted", "image_not_found")
    scheduled = {
        e.event_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "pick_host"
    }
    picks = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]
    assert picks == [IMAGE_AFFINITY_ATTEMPTS + 1], "three refusals, then this host took it"


async def test_a_failed_boot_gives_its_slot_back_at_once_and_logs_one_line(renderer, caplog):
    """Real pick_host and boot_sandbox against real Docker and a real dev server (the time-skipping
    server does not tell activities their retry policy): a missing image (pulls off: non-retryable,
    ``image_not_found``) and an invalid image reference (an unexpected Docker error, retried to its
    last attempt, ``sandbox_boot_failed``) leave no reservation, so a good row is picked right after on
    a one-slot host. The expected failure is one log line; the unexpected one keeps its traceback."""
    activity_failure_log.install()
    caplog.set_level(logging.WARNING, logger="temporalio.activity")
    env = await start_dev_server()
    await ensure_search_attributes(env.client, "default")
    adapter = AdapterServer(renderer)
    await adapter.start()
    shared, host_queue = f"slots-{uuid.uuid4().hex[:6]}", f"slots-host-{uuid.uuid4().hex[:6]}"
    rollout_host = host(adapter, slots=1, host_queue=host_queue, images=ImageSettings(pull_policy="never"))
    try:
        async with (
            Worker(env.client, task_queue=shared, workflows=[CodingAgentRollout], activities=[rollout_host.pick_host]),
            Worker(env.client, task_queue=host_queue, activities=[rollout_host.boot_sandbox]),
        ):
            for image, reason in (
                ("rollout-task-does-not-exist:latest", "image_not_found"),
                ("Not A Valid Reference!", "sandbox_boot_failed"),
            ):
                result = await env.client.execute_workflow(
                    CodingAgentRollout.run, bad_row(image), id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=shared
                )
                assert (result.status, result.abort_reason) == ("aborted", reason)
                assert rollout_host.reserved_slots == 0, f"the failed boot of {image} still holds its slot"
        assert await as_workflow("wf-good").run(rollout_host.pick_host, ANY_IMAGE) == host_queue
    finally:
        await adapter.stop()
        await env.shutdown()
    boots = [r for r in caplog.records if r.name == "temporalio.activity" and "boot_sandbox" in r.getMessage()]
    missing = [r for r in boots if "SandboxImageMissing" in r.getMessage()]
    unexpected = [r for r in boots if r.exc_info and "invalid reference format" in str(r.exc_info[1])]
    assert len(missing) == 1 and missing[0].exc_info is None and "\n" not in missing[0].getMessage(), [
        r.getMessage() for r in boots
    ]
    assert len(unexpected) == 3, "an unexpected failure keeps its traceback, once per attempt"


@pytest.mark.integration
@pytest.mark.parametrize("cause", ["lost_heartbeat", "workflow_cancel"])
async def test_a_boot_cancelled_for_a_lost_heartbeat_keeps_its_slot_for_the_retry(renderer, cause):
    """Real Docker: a boot cancelled mid-way because its heartbeat was lost (a server restart) is retried on this
    host, so its reservation stays; a cancel the workflow asked for is final and gives the slot back."""
    rollout_host = host(AdapterServer(renderer), slots=1)
    workflow_id = f"boot-cancel-{uuid.uuid4().hex[:8]}"
    env = as_workflow(workflow_id)
    assert await env.run(rollout_host.pick_host, ANY_IMAGE) == "rl-rollouts-host-test"
    task = TaskSpec(
        instance_id="boot-cancel",
        image="rollout-base:bookworm",
        workdir="/tmp",
        problem_statement="p",
        eval_cmd="true",
        pre_commands=["sleep 120"],
    )
    boot = asyncio.create_task(
        env.run(rollout_host.boot_sandbox, SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
    )
    while not [
        c
        for c in await rollout_host.sandboxes.list_managed()
        if c.labels.get(f"{container_layout.LABEL_PREFIX}.workflow_id") == workflow_id
    ]:
        await asyncio.sleep(0.2)
    env.cancel(
        ActivityCancellationDetails(timed_out=True)
        if cause == "lost_heartbeat"
        else ActivityCancellationDetails(cancel_requested=True)
    )
    with pytest.raises(asyncio.CancelledError):
        await boot
    assert rollout_host.reserved_slots == (1 if cause == "lost_heartbeat" else 0)
    assert not [
        c
        for c in await rollout_host.sandboxes.list_managed()
        if c.labels.get(f"{container_layout.LABEL_PREFIX}.workflow_id") == workflow_id
    ]


@contextlib.asynccontextmanager
async def agent_host(
    renderer, policy: ScriptedPolicyServer, sandboxes_class: type[DockerSandboxes] = DockerSandboxes, **settings
):
    """A host running real Claude Code in real sandboxes against a real adapter and ``policy``; ``settings``
    go to its ``SandboxSettings``. Yields the host and its adapter."""
    sandbox_network = await asyncio.to_thread(ensure_network, docker.from_env())
    adapter = AdapterServer(renderer)
    await adapter.start(sandbox_network.gateway, 0)
    try:
        policy_url = await policy.start()
        assert await asyncio.to_thread(sandbox_firewall.protect, sandbox_network.bridge, adapter.port)
        sandboxes = sandboxes_class(
            SandboxSettings(network=sandbox_network.name, claude_code=find_claude_code(), lifetime_s=600, **settings)
        )
        yield (
            RolloutHost(
                sandboxes=sandboxes,
                adapter=adapter,
                host_queue="rl-rollouts-host-test",
                adapter_public_url=f"http://{sandbox_network.gateway}:{adapter.port}",
                default_policy_url=policy_url,
                agent_slots=2,
                pin_policy_url=True,
            ),
            adapter,
        )
    finally:
        await asyncio.to_thread(sandbox_firewall.revoke_port, adapter.port)
        await policy.stop()
        await adapter.stop()


def oracle_policy(renderer, name: str = "oracle", **options) -> ScriptedPolicyServer:
    return ScriptedPolicyServer(
        renderer, default_policy=name, oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), **options
    )


@pytest.mark.integration
@pytest.mark.parametrize("cause", ["lost_heartbeat", "workflow_cancel"])
async def test_only_a_cancel_the_workflow_asked_for_stops_the_agent(renderer, cause):
    """Real sandbox, real Claude Code, real adapter. An agent activity cancelled because its heartbeat
    was lost (what a Temporal restart does) leaves the agent running and its session unclaimed, and the
    retry re-attaches to both; a cancel the workflow asked for finishes the session and stops the agent."""
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    workflow_id = f"cancel-{uuid.uuid4().hex[:8]}"
    async with agent_host(renderer, oracle_policy(renderer, "slow", delay_s=2.0)) as (rollout_host, adapter):
        sandboxes = rollout_host.sandboxes
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
        try:
            request = AgentRunRequest(
                handle=handle, task=task, policy=PolicySpec(), workflow_id=workflow_id, attempt=1, time_budget_s=240
            )
            beats: list[dict] = []
            first = as_workflow(workflow_id)
            first.on_heartbeat = lambda *details: beats.append(details[0])
            run = asyncio.create_task(first.run(rollout_host.run_claude_code, request))
            while not beats or not (session := adapter.registry.get(beats[-1]["session_id"])) or not session.turns:
                await asyncio.sleep(0.2)
            session_id = beats[-1]["session_id"]
            first.cancel(
                ActivityCancellationDetails(timed_out=True)
                if cause == "lost_heartbeat"
                else ActivityCancellationDetails(cancel_requested=True)
            )
            with pytest.raises(asyncio.CancelledError):
                await run
            status = await sandboxes.detached_status(handle, "claude")
            if cause == "workflow_cancel":
                assert adapter.registry.get(session_id) is None and not status.running
                return
            assert adapter.registry.get(session_id) is not None and status.running, (
                "the agent and its session outlive the lost heartbeat"
            )
            assert adapter.registry.live_count == 1, "a let-go session keeps its slot while its agent runs on"
            retry = ActivityEnvironment()
            retry.info = dataclasses.replace(
                ActivityEnvironment.default_info(), workflow_id=workflow_id, attempt=2, heartbeat_details=[beats[-1]]
            )
            agent = await retry.run(rollout_host.run_claude_code, request)
            assert (agent.session_id, agent.exit_code, agent.turns, agent.interruptions) == (session_id, 0, 3, 1), agent
            lines = agent.log.splitlines()
            assert json.loads(lines[-1])["type"] == "result" and agent.log_tail == "\n".join(lines[-5:])[-2000:], (
                "the whole log is in the result"
            )
            assert agent.log_path == "", "only a results file names a log file"
            assert adapter.registry.live_count == 1, "the retry holds the session until it is merged"
        finally:
            await sandboxes.destroy(handle)


@pytest.mark.integration
async def test_one_exec_starts_the_agent_and_waits_for_it_and_a_failed_start_finishes_its_session(
    renderer, monkeypatch
):
    """The launch rides on the exec that waits the first slice (a slice long enough for the whole run here);
    a launch that fails (the name already started) fails the activity with its session finished at once."""
    monkeypatch.setattr(agent_wait, "WAIT_SLICE_S", 600.0)
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    workflow_id = f"one-exec-{uuid.uuid4().hex[:8]}"
    async with agent_host(renderer, oracle_policy(renderer), CountingSandboxes) as (rollout_host, adapter):
        sandboxes = rollout_host.sandboxes
        assert isinstance(sandboxes, CountingSandboxes)
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
        try:
            request = AgentRunRequest(
                handle=handle, task=task, policy=PolicySpec(), workflow_id=workflow_id, attempt=1, time_budget_s=240
            )
            sandboxes.calls.clear()
            agent = await as_workflow(workflow_id).run(rollout_host.run_claude_code, request)
            assert (agent.exit_code, agent.reason) == (0, "completed") and agent.turns > 0, agent
            assert dict(sandboxes.calls) == {"exec": 1, "archive read": 1}, (
                "one exec to start and wait, one read of the log"
            )
            assert adapter.registry.live_count == 1, "the run's session stays until it is merged"
            with pytest.raises(DetachedLaunchFailed, match="already started"):
                await as_workflow(workflow_id).run(rollout_host.run_claude_code, request)
            assert adapter.registry.live_count == 1, "the failed start's session is finished, not left for a retry"
        finally:
            await sandboxes.destroy(handle)


@pytest.mark.integration
async def test_a_sandbox_over_its_disk_budget_before_the_agent_starts_starts_no_agent(renderer):
    """The agent starts only once the disk watch's first size is under the budget."""
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    workflow_id = f"full-{uuid.uuid4().hex[:8]}"
    async with agent_host(renderer, oracle_policy(renderer), limits=SandboxLimits(disk_bytes=1 << 20)) as (
        rollout_host,
        adapter,
    ):
        sandboxes = rollout_host.sandboxes
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
        try:
            assert (await sandboxes.exec(handle, "head -c 3000000 /dev/zero > /tmp/filler")).exit_code == 0
            request = AgentRunRequest(
                handle=handle, task=task, policy=PolicySpec(), workflow_id=workflow_id, attempt=1, time_budget_s=240
            )
            agent = await as_workflow(workflow_id).run(rollout_host.run_claude_code, request)
            assert (agent.exit_code, agent.reason, agent.turns, agent.log) == (None, "sandbox_disk_exceeded", 0, "")
            assert not (await sandboxes.detached_status(handle, "claude")).started
        finally:
            await sandboxes.destroy(handle)


@pytest.mark.integration
async def test_a_real_failure_uses_the_runs_budget_and_the_last_one_ends_it_for_good(renderer, monkeypatch):
    """Real sandbox, real Claude Code, real adapter: the wait for the agent fails (as a Docker error would) on every
    attempt. Each failure is written to the ledger in the last heartbeat; the third ends the run non-retryably, with
    the failure's own type, while an attempt after an interruption would have cost nothing (``RunLedger``)."""
    real_wait = rollout_host_module.wait_for_agent

    async def failing_wait(sandboxes, handle, disk_bytes, launch, deadline):
        if launch is not None:  # the first attempt launches the agent for real, so later attempts have one to resume
            await real_wait(sandboxes, handle, disk_bytes, launch, deadline=time.time() + 1)
        raise SandboxError("docker exec failed: the engine said no")

    monkeypatch.setattr(rollout_host_module, "wait_for_agent", failing_wait)
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    workflow_id = f"fails-{uuid.uuid4().hex[:8]}"
    async with agent_host(renderer, oracle_policy(renderer, "slow", delay_s=5.0)) as (rollout_host, adapter):
        sandboxes = rollout_host.sandboxes
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
        try:
            request = AgentRunRequest(
                handle=handle, task=task, policy=PolicySpec(), workflow_id=workflow_id, attempt=1, time_budget_s=240
            )
            beats: list[dict] = []
            for attempt in (1, 2, 3):
                env = ActivityEnvironment()
                env.info = dataclasses.replace(
                    ActivityEnvironment.default_info(),
                    workflow_id=workflow_id,
                    attempt=attempt,
                    heartbeat_details=beats[-1:],
                )
                env.on_heartbeat = lambda *details: beats.append(details[0])
                if attempt < 3:
                    with pytest.raises(SandboxError, match="the engine said no"):
                        await env.run(rollout_host.run_claude_code, request)
                    assert beats[-1]["failures"] == attempt, "written before the attempt failed"
                    continue
                with pytest.raises(ApplicationError) as final:
                    await env.run(rollout_host.run_claude_code, request)
                assert (final.value.type, final.value.non_retryable) == ("SandboxError", True)
                assert "real failure 3 of 3" in final.value.message
            assert adapter.registry.live_count == 0, "a run given up for good leaves no session behind"
        finally:
            await sandboxes.destroy(handle)
