"""Activities that must run on the worker that owns a sandbox and its adapter session.

``RolloutHost`` is made once per worker process with its adapter; its bound methods are the host queue's activities
(``pick_host`` and ``prefetch_image`` on the shared queue: whichever host polls first answers). Where a rollout goes
is decided by ``durable_rollouts.docker_sandbox.host_placement``; the agent's log is read and cut by
``durable_rollouts.claude_code.agent_log``; the session's policy and parsers by ``policy.session_config``.

``run_claude_code`` starts Claude Code detached in the sandbox, heartbeats the session's progress and the run's
ledger, and enforces the wall-clock and disk budgets itself (an agent stopped at either returns normally and is
graded). Key invariant when it does not return: cancelled because its workflow asked, the agent is stopped and its
session finished; cancelled for any other reason (a lost heartbeat, a timeout) or failed, the agent keeps running
and the session is let go unfinished, so the retry re-attaches to both, exactly as after a worker restart; only the
attempt that holds a session lets it go. docs/fault_tolerance.md lists each case and the test that shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities import sandbox
from activities.activity_failures import SESSION_SETUP_FAILURES, Failure, Translation, application_error, final_failure
from activities.error_types import ErrorType
from durable_rollouts.claude_code.agent_log import decoded, read_agent_log
from durable_rollouts.claude_code.agent_wait import AgentLaunch, wait_for_agent
from durable_rollouts.claude_code.harness import ClaudeCodeSettings, judge_run
from durable_rollouts.claude_code.run_ledger import MAX_AGENT_FAILURES, RunLedger
from durable_rollouts.contracts.agent_runs import AgentRun, AgentRunRequest
from durable_rollouts.contracts.image_prefetch import Prefetched, PrefetchRequest
from durable_rollouts.contracts.rollouts import AgentProgress
from durable_rollouts.contracts.sandboxes import PickRequest, SandboxHandle, SandboxRequest
from durable_rollouts.contracts.session import PolicyEngine
from durable_rollouts.docker_sandbox.errors import (
    DetachedLaunchFailed,
    RegistryAuthFailed,
    RegistryUnavailable,
    SandboxImageMissing,
)
from durable_rollouts.docker_sandbox.git_workspace import AGENT_JOB
from durable_rollouts.docker_sandbox.host_placement import (
    IMAGE_AFFINITY_ATTEMPTS,
    AgentSlots,
    pick_refusal,
    prefetch_refusal,
)
from durable_rollouts.docker_sandbox.image_refs import ImageReferenceError
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.session_config import DEFAULT_PARSERS, ParserDefaults, session_config_for
from durable_rollouts.policy.sglang_client import PolicyServerError

log = logging.getLogger(__name__)
DEFAULT_CLAUDE_SETTINGS = ClaudeCodeSettings()  # RolloutHost's default; shared, never mutated
HEARTBEAT_INTERVAL_S = 3.0
# The workflow hears of new turns at most this often (each signal is a workflow task and a search-attribute update).
PROGRESS_SIGNAL_INTERVAL_S = 10.0


class HostFull(Exception):
    """Every agent slot of this host is taken (``pick_host`` refuses; another worker may take the rollout)."""


class ImageElsewhere(Exception):
    """This host lacks the rollout's image; ``pick_host`` leaves it for a host that holds it a few attempts long."""


class PullsBusy(Exception):
    """This host already pulls ``host_placement.PREFETCH_PULLS_PER_HOST`` images ahead; another host may take it."""


PREFETCH_FAILURES = Translation(
    Failure(ImageReferenceError, ErrorType.SANDBOX_IMAGE_MISSING),
    Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
    Failure(RegistryAuthFailed, ErrorType.REGISTRY_AUTH_FAILED),
    Failure(RegistryUnavailable, ErrorType.REGISTRY_UNAVAILABLE, retryable=True),
)


class WorkerShutdown(Exception):
    """This worker is shutting down under a running agent (its session stays spooled for the retry)."""


class SessionLost(Exception):
    """A retried agent activity found no session or no launched agent to re-attach to."""


class RolloutHost:
    def __init__(
        self,
        sandboxes: DockerSandboxes,
        adapter: AdapterServer,
        host_queue: str,
        adapter_public_url: str,
        default_policy_url: str | None,
        agent_slots: int,
        claude: ClaudeCodeSettings = DEFAULT_CLAUDE_SETTINGS,
        client: Client | None = None,
        pin_policy_url: bool = False,
        parsers: ParserDefaults = DEFAULT_PARSERS,
        image_affinity: bool = True,
        policy_engine: PolicyEngine = "sglang",
    ):
        self.sandboxes = sandboxes
        self.adapter = adapter
        self.host_queue = host_queue
        self.adapter_public_url = adapter_public_url
        self.default_policy_url = default_policy_url
        self.agent_slots = agent_slots
        self.client = client
        self.pin_policy_url = pin_policy_url
        self.parsers = parsers
        self.policy_engine = policy_engine
        self.image_affinity = image_affinity
        self.slots = AgentSlots(agent_slots)
        self._prefetching = 0
        self.claude = claude

    @property
    def reserved_slots(self) -> int:
        """Slots reserved by ``pick_host`` for workflows whose agent has not started yet."""
        return self.slots.reserved

    @property
    def slots_in_use(self) -> int:
        """Slots held: live adapter sessions plus ``pick_host`` reservations."""
        return self.slots.in_use(self._live_sessions())

    def _live_sessions(self) -> int:
        registry = self.adapter.registry
        return registry.live_count if registry is not None else 0

    @activity.defn(name="pick_host")
    async def pick_host(self, request: PickRequest | None = None) -> str:
        """Reserve an agent slot on this worker and return its host queue, or refuse (retried elsewhere).

        A full host refuses (``HostFull``). With ``image_affinity``, a host with a free slot whose engine lacks the
        rollout's image refuses too (``ImageElsewhere``), ``IMAGE_AFFINITY_ATTEMPTS`` times in all across the
        fleet (counted in the activity's heartbeat details, which carry over to the next attempt; ``HostFull``
        refusals do not count), so a host that holds it takes the rollout when one has a free slot; after that
        whichever host with a free slot polls first takes it and pulls the image. A request without an image
        (from a workflow of an earlier release) is placed by slots alone.

        A slot is held by a reservation from here until the attempt's agent
        activity starts, its boot fails for good, or ``host_placement.RESERVATION_TTL_S``
        passes; then by the session the agent activity holds until it is
        merged or discarded.
        """
        key = activity.info().workflow_id
        assert key is not None, "pick_host is scheduled by a workflow"
        details = activity.info().heartbeat_details
        refusals = int(details[0]) if details else 0
        image = request.image if request is not None else ""
        holds = bool(image) and self._holds(image)
        refusal = pick_refusal(
            self.slots.has_room(key, self._live_sessions()), image, holds, self.image_affinity, refusals
        )
        if refusal == "full":
            activity.heartbeat(refusals)  # a full host's refusal does not count against the image's
            raise application_error(
                HostFull(f"{self.host_queue} is full ({self.agent_slots} agent slots)"),
                ErrorType.HOST_FULL,
                retryable=True,
            )
        if refusal == "image_elsewhere":
            activity.heartbeat(refusals + 1)
            raise application_error(
                ImageElsewhere(f"{self.host_queue} lacks {image}"), ErrorType.IMAGE_ELSEWHERE, retryable=True
            )
        self.slots.reserve(key)
        return self.host_queue

    def _holds(self, image: str) -> bool:
        """Whether this engine holds ``image`` (as the rows name it) or is pulling it now."""
        try:
            local = self.sandboxes.images.settings.local_name(image)
        except ValueError:  # not an image reference: no host holds it, the boot reports it
            return False
        return self.sandboxes.image_cache.holds(local) or self.sandboxes.images.pulling(local)

    @activity.defn(name="prefetch_image")
    async def prefetch_image(self, request: PrefetchRequest) -> Prefetched:
        """Have a task image on this host before the groups that need it start (``DockerSandboxes.prefetch``);
        scheduled on the shared queue, so whichever host polls first takes it.

        A host that holds the image (or is pulling it) takes it at once. One that lacks it refuses (retried, so
        another host may take it): with ``image_affinity``, ``IMAGE_AFFINITY_ATTEMPTS`` times in all (counted in
        the heartbeat details, as ``pick_host`` counts), so a host that holds it answers ``held`` rather than a
        second host pulling it; then while it already pulls ``host_placement.PREFETCH_PULLS_PER_HOST`` images ahead.
        Heartbeats the pull's progress (``ImagePull``) every ``HEARTBEAT_INTERVAL_S``.
        """
        details = activity.info().heartbeat_details
        refusals = (
            details[0] if details and isinstance(details[0], int) else (IMAGE_AFFINITY_ATTEMPTS if details else 0)
        )
        refusal = prefetch_refusal(self._holds(request.image), self.image_affinity, refusals, self._prefetching)
        if refusal == "image_elsewhere":
            activity.heartbeat(refusals + 1)
            raise application_error(
                ImageElsewhere(f"{self.host_queue} lacks {request.image}"), ErrorType.IMAGE_ELSEWHERE, retryable=True
            )
        if refusal == "pulls_busy":
            activity.heartbeat(refusals)
            raise application_error(
                PullsBusy(f"{self.host_queue} already pulls {self._prefetching} images ahead"),
                ErrorType.PULLS_BUSY,
                retryable=True,
            )
        started, latest = time.monotonic(), dict[str, dict[str, Any]]()
        self._prefetching += 1
        try:
            async with sandbox.heartbeating(lambda: latest.get("pull"), HEARTBEAT_INTERVAL_S):
                outcome = await self.sandboxes.prefetch(
                    request.image, request.pull_timeout_s, lambda pull: latest.update(pull=pull.model_dump())
                )
        except PREFETCH_FAILURES.handled as error:
            raise PREFETCH_FAILURES(error) from None
        finally:
            self._prefetching -= 1
        return Prefetched(
            image=request.image,
            outcome=outcome,
            host_queue=self.host_queue,
            seconds=round(time.monotonic() - started, 1),
        )

    @activity.defn(name="boot_sandbox")
    async def boot_sandbox(self, request: SandboxRequest) -> SandboxHandle:
        """``sandbox.boot_sandbox``; a boot that fails for good (not retryable, cancelled, or its last
        attempt) gives the workflow's reserved slot back at once instead of holding it for the TTL."""
        try:
            return await sandbox.boot_sandbox(self.sandboxes, request, self.client)
        except BaseException as error:
            if _final_failure(error):
                self.slots.release(request.workflow_id)
            raise

    @activity.defn(name="run_claude_code")
    async def run_claude_code(self, request: AgentRunRequest) -> AgentRun:
        """Run (or, on a retry after a worker restart, re-attach to) the agent and judge how it ended.

        A retry finds the session id and the agent's start time in the last
        heartbeat; if this worker restored that session from its spool and the
        agent process was launched, it waits for the same process with the
        rest of the budget. Otherwise it fails as ``SessionLost`` and the
        workflow starts a fresh attempt. The heartbeat also carries the run's
        ``RunLedger``: an interruption (a restart, an outage) costs nothing;
        a real failure uses one of ``MAX_AGENT_FAILURES``, the last of which
        ends the run non-retryably.
        """
        registry = self.adapter.registry
        assert registry is not None
        self.slots.release(request.workflow_id)
        info = activity.info()
        ledger = RunLedger.after(info.heartbeat_details[0] if info.heartbeat_details else None, info.attempt)
        if info.attempt > 1:
            log.info(
                "agent of %s: attempt %d resumes after %s", request.handle.name, info.attempt, _ledger_text(ledger)
            )
        resumed = await self._resumable(request)
        launch: AgentLaunch | None = None
        if resumed is not None:
            session_id, started_at = resumed
        else:
            try:
                session_id, launch = self._open_session(request)
            except SESSION_SETUP_FAILURES.handled as error:
                raise SESSION_SETUP_FAILURES(error) from None
            started_at = time.time()
        attempt = info.attempt
        session = registry.claim(session_id, attempt)
        beat = asyncio.create_task(self._heartbeat(session_id, started_at, request, ledger))
        try:
            disk_bytes = self.sandboxes.limits_for(request.task).disk_bytes
            exit_code, stopped = await wait_for_agent(
                self.sandboxes, request.handle, disk_bytes, launch, deadline=started_at + request.time_budget_s
            )
            if exit_code is None:
                await self.sandboxes.kill_detached(request.handle, AGENT_JOB)
            agent_log = await read_agent_log(self.sandboxes, request.handle)
        except BaseException as error:
            beat.cancel()
            if activity.is_worker_shutdown():
                raise application_error(
                    WorkerShutdown("worker shut down while the agent ran; its session stays spooled"),
                    ErrorType.WORKER_SHUTDOWN,
                    retryable=True,
                ) from None
            final: ApplicationError | None = None
            if isinstance(error, Exception):  # a real failure (a cancellation is the server's or the workflow's)
                activity.heartbeat(self._progress_details(session_id, started_at, request) | ledger.failure_details())
                if ledger.failed().exhausted:
                    final = final_failure(error, f"real failure {ledger.failed().failures} of {MAX_AGENT_FAILURES}")
            if registry.held_by(session_id, attempt):
                if isinstance(error, DetachedLaunchFailed) or final is not None:
                    await registry.finish_session(
                        session_id, grace_s=0
                    )  # no agent runs, or none will be re-attached to
                elif _stopped_by_workflow(error):
                    await registry.finish_session(
                        session_id, grace_s=0
                    )  # the rollout is stopped: abort its turns at once
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self.sandboxes.kill_detached(request.handle, AGENT_JOB))
                else:
                    log.info(
                        "agent activity for %s attempt %d ended (%s); the agent keeps running for the retry",
                        request.handle.name,
                        attempt,
                        _why(error),
                    )
                    registry.unclaim(session_id)
            if final is not None:
                raise final from error
            raise
        finally:
            beat.cancel()
        text, lines = await asyncio.to_thread(decoded, agent_log)  # up to 8 MiB: off the adapter's event loop
        verdict = judge_run(lines, exit_code if exit_code is not None else -1)
        if verdict.is_error and session is not None and session.policy_failure is not None:
            # The agent gave up because the policy server failed its last call: the machinery's failure, never a sample.
            await registry.finish_session(session_id, grace_s=0)
            raise application_error(PolicyServerError(session.policy_failure), ErrorType.POLICY_SERVER_ERROR)
        return AgentRun(
            session_id=session_id,
            exit_code=exit_code,
            reason=stopped or verdict.reason,
            is_error=verdict.is_error,
            terminal_reason=verdict.terminal_reason,
            turns=len(session.turns) if session else 0,
            aborts_continued=sum(turn.aborts_continued for turn in session.turns) if session else 0,
            interruptions=ledger.interruptions,
            duration_s=round(time.time() - started_at, 3),
            log=text,
            log_tail="\n".join(lines[-5:])[-2000:],
        )

    def _open_session(self, request: AgentRunRequest) -> tuple[str, AgentLaunch]:
        """Open a fresh adapter session; returns its id and the Claude Code command that uses it."""
        registry = self.adapter.registry
        assert registry is not None
        policy = request.policy
        config = session_config_for(
            policy,
            self.default_policy_url,
            self.pin_policy_url,
            f"{request.workflow_id}#{request.attempt}",
            parsers=self.parsers,
            worker_engine=self.policy_engine,
        )
        ticket = registry.open_session(config)
        return ticket.session_id, AgentLaunch.for_session(
            self.claude, self.adapter_public_url, ticket.secret, policy.context_budget
        )

    async def _resumable(self, request: AgentRunRequest) -> tuple[str, float] | None:
        info = activity.info()
        if info.attempt == 1:
            return None
        details = info.heartbeat_details[0] if info.heartbeat_details else {}
        session_id = details.get("session_id") if isinstance(details, dict) else None
        registry = self.adapter.registry
        assert registry is not None
        if not session_id or not registry.resumable(session_id):
            raise application_error(
                SessionLost(f"attempt {info.attempt}: the agent session did not survive"), ErrorType.SESSION_LOST
            )
        status = await self.sandboxes.detached_status(request.handle, AGENT_JOB)
        if not status.started:
            await registry.finish_session(session_id, grace_s=0)
            raise application_error(
                SessionLost(f"attempt {info.attempt}: the agent was never launched"), ErrorType.SESSION_LOST
            )
        log.info(
            "re-attaching to %s (session %s, agent %s)",
            request.handle.name,
            session_id,
            "running" if status.running else "finished",
        )
        return session_id, float(details.get("started_at") or time.time())

    def _progress(self, session_id: str, request: AgentRunRequest) -> AgentProgress:
        registry = self.adapter.registry
        session = registry.get(session_id) if registry else None
        oldest, newest = session.weight_version_range() if session else (None, None)
        return AgentProgress(
            attempt=request.attempt,
            session_id=session_id,
            turns=len(session.turns) if session else 0,
            tokens=session.turns[-1].prompt_tokens + session.turns[-1].completion_tokens
            if session and session.turns
            else 0,
            last_turn_at=session.last_turn_at if session else None,
            last_tools=session.turns[-1].tool_names if session and session.turns else [],
            oldest_weight_version=oldest,
            newest_weight_version=newest,
            sampled_tokens=sum(turn.completion_tokens for turn in session.turns) if session else 0,
        )

    def _progress_details(self, session_id: str, started_at: float, request: AgentRunRequest) -> dict[str, Any]:
        """The heartbeat's details but for the ledger: the progress, the sandbox and when the agent started."""
        return self._progress(session_id, request).model_dump(mode="json") | {
            "sandbox": request.handle.name,
            "started_at": started_at,
        }

    async def _heartbeat(self, session_id: str, started_at: float, request: AgentRunRequest, ledger: RunLedger) -> None:
        """Heartbeat every few seconds (the progress, and the run's ledger for the next attempt); tell the workflow
        (signal) when the turn count moved, at once the first time and then at most every
        ``PROGRESS_SIGNAL_INTERVAL_S``."""
        signalled_turns = 0
        signalled_at = -PROGRESS_SIGNAL_INTERVAL_S
        workflow_id = activity.info().workflow_id
        assert workflow_id is not None, "run_claude_code is scheduled by a workflow"
        workflow = self.client.get_workflow_handle(workflow_id) if self.client else None
        while True:
            progress = self._progress(session_id, request)
            activity.heartbeat(self._progress_details(session_id, started_at, request) | ledger.details())
            due = time.monotonic() - signalled_at >= PROGRESS_SIGNAL_INTERVAL_S
            if workflow is not None and progress.turns != signalled_turns and due:
                try:
                    await workflow.signal("agent_progress", progress)
                    signalled_turns, signalled_at = progress.turns, time.monotonic()
                except RPCError as error:
                    log.warning("progress signal for %s failed: %s", request.workflow_id, error)
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)


def _ledger_text(ledger: RunLedger) -> str:
    return f"{ledger.interruptions} interruptions and {ledger.failures} of {MAX_AGENT_FAILURES} real failures"


def _stopped_by_workflow(error: BaseException) -> bool:
    """A cancellation the workflow (or an operator through it) asked for, as opposed to a lost heartbeat or timeout."""
    details = activity.cancellation_details()
    return (
        isinstance(error, asyncio.CancelledError)
        and details is not None
        and (details.cancel_requested or details.reset)
    )


def _why(error: BaseException) -> str:
    details = activity.cancellation_details()
    if isinstance(error, asyncio.CancelledError) and details is not None:
        return "cancelled: " + ", ".join(k for k, v in vars(details).items() if v)
    return f"{type(error).__name__}: {error}"


def _final_failure(error: BaseException) -> bool:
    """Whether the failing activity attempt is the last one Temporal will run (a cancel for a lost heartbeat is
    retried)."""
    if isinstance(error, asyncio.CancelledError):
        return _stopped_by_workflow(error)
    if isinstance(error, ApplicationError) and error.non_retryable:
        return True
    info = activity.info()
    policy = info.retry_policy
    return policy is not None and policy.maximum_attempts > 0 and info.attempt >= policy.maximum_attempts
