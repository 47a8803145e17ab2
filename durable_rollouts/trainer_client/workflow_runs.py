"""The trainer's side of many workflows: start or attach, wait through server restarts, never let one run end the rest.

Invariants:
* **One run never ends the others.** Every error while starting or waiting for a workflow becomes that run's
  ``RunFailure`` (a machine-readable ``reason`` and the message), which the caller turns into a ``failed`` result;
  ``run_limited`` runs all items and returns one result per item, in input order, and an ``on_result`` callback that
  raises is logged, not fatal.
* **A Temporal outage is waited out.** A call that fails with a transient gRPC status is retried once the server
  answers a health check again, for up to ``server_wait_s`` per outage (then the run fails ``server_unavailable``);
  waiting re-gets the handle each time, so the workflow, which survives the restart, is collected.
* **Starting is idempotent** (``start_or_attach`` rejects duplicate ids and attaches to a running or closed one), so a
  retried start never runs a workflow twice.

The reasons, and what a re-run under the same ids does with each: docs/running.md, "The starter's failures".
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import exceptions as temporal_errors
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from durable_rollouts.trainer_client.payload_storage import PAYLOAD_TOO_LARGE, PayloadUnreadable

log = logging.getLogger(__name__)
# ``ROLLOUT_SERVER_WAIT_S``: how long one outage may last; the next outage gets the full time again.
DEFAULT_SERVER_WAIT_S = 300.0
# A call that keeps failing while the server answers its health checks fails with its status after this many tries.
MAX_RETRIES_PER_CALL = 20
# Statuses waited out (the SDK has already retried the call for about 10 s); others fail the call at once.
TRANSIENT = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNKNOWN, RPCStatusCode.CANCELLED}
)
Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class RunFailure:
    reason: str
    message: str


class ServerUnavailable(Exception):
    pass


async def start_or_attach(
    client: Client, workflow: Any, arg: Any, workflow_id: str, task_queue: str, result_type: type, summary: str
) -> WorkflowHandle:
    """Start ``workflow`` under ``workflow_id``, or attach to the run that id already has (running or closed)."""
    try:
        return await client.start_workflow(
            workflow,
            arg,
            id=workflow_id,
            task_queue=task_queue,
            result_type=result_type,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=summary,
        )
    except temporal_errors.WorkflowAlreadyStartedError:
        return client.get_workflow_handle(workflow_id, result_type=result_type)


def server_wait_from_env(env: Mapping[str, str] = os.environ) -> float:
    """``ROLLOUT_SERVER_WAIT_S`` (seconds one outage may last), default ``DEFAULT_SERVER_WAIT_S``."""
    text = env.get("ROLLOUT_SERVER_WAIT_S") or str(DEFAULT_SERVER_WAIT_S)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"ROLLOUT_SERVER_WAIT_S={text!r}: must be a number of seconds") from None
    if not value >= 0:
        raise ValueError(f"ROLLOUT_SERVER_WAIT_S={text!r}: must be 0 or more seconds")
    return value


async def collect(
    client: Client,
    workflow_id: str,
    start: Callable[[], Awaitable[Any]],
    result_type: type,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
) -> Any:
    """Start (or attach to) the workflow and return its result, or the ``RunFailure`` that explains why not."""
    stage = "start_rejected"
    try:
        await through_outages(client, start, server_wait_s)
        stage = "wait_failed"
        return await through_outages(
            client, lambda: client.get_workflow_handle(workflow_id, result_type=result_type).result(), server_wait_s
        )
    except ServerUnavailable as error:
        return RunFailure("server_unavailable", str(error))
    except RPCError as error:
        return RunFailure(f"{stage}:{error.status.name}", error.message)
    except WorkflowFailureError as error:
        return RunFailure(_closed_reason(error.cause), str(error.cause))
    except Exception as error:
        return RunFailure(_payload_reason(error) or f"exception:{type(error).__name__}", _message(error))


async def through_outages(client: Client, call: Callable[[], Awaitable[Result]], server_wait_s: float) -> Result:
    """``await call()``, repeated after each transient server error once the server answers again."""
    for _ in range(MAX_RETRIES_PER_CALL):
        try:
            return await call()
        except RPCError as error:
            if error.status not in TRANSIENT:
                raise
            await wait_for_server(client, server_wait_s, error)
    return await call()


async def wait_for_server(client: Client, server_wait_s: float, cause: RPCError) -> None:
    """Return once the server answers a health check; raise ``ServerUnavailable`` after ``server_wait_s``."""
    loop = asyncio.get_running_loop()
    deadline, delay = loop.time() + server_wait_s, 1.0
    while loop.time() + delay <= deadline:
        await asyncio.sleep(delay)
        delay = min(2 * delay, 10.0)
        try:
            if await client.service_client.check_health(timeout=timedelta(seconds=5)):
                return
        except RPCError as error:
            if error.status not in TRANSIENT:
                return
    raise ServerUnavailable(
        f"the Temporal server did not answer for {server_wait_s:g} s ({cause.status.name}: {cause.message})"
    )


async def run_limited(
    items: Iterable[Item],
    run_one: Callable[[Item], Awaitable[Result]],
    concurrency: int,
    on_result: Callable[[Result], Awaitable[None] | None] | None = None,
) -> list[Result]:
    """``run_one`` for every item, at most ``concurrency`` at a time; results in input order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> Result:
        async with gate:
            result = await run_one(item)
        if on_result is not None:
            try:
                maybe = on_result(result)
                if asyncio.iscoroutine(maybe):
                    await maybe
            except Exception:
                log.exception(
                    "handling the result of %s failed; the run goes on", getattr(result, "workflow_id", result)
                )
        return result

    return list(await asyncio.gather(*(one(item) for item in items)))


def _closed_reason(cause: BaseException | None) -> str:
    if isinstance(cause, temporal_errors.TerminatedError):
        return "workflow_terminated"
    if isinstance(cause, temporal_errors.CancelledError):
        return "workflow_cancelled"
    if isinstance(cause, temporal_errors.TimeoutError):
        return "workflow_timed_out"
    return "workflow_failed"


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes, outermost first."""
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    return chain


def _payload_reason(error: Exception) -> str | None:
    """``payload_too_large`` / ``payload_unreadable`` for an error of the payload store, else None."""
    for link in _chain(error):
        if isinstance(link, temporal_errors.ApplicationError) and link.type == PAYLOAD_TOO_LARGE:
            return "payload_too_large"
        if isinstance(link, PayloadUnreadable):
            return "payload_unreadable"
    return None


def _message(error: Exception) -> str:
    """The error's message, with its causes' when they say more (the store's key is in a cause)."""
    return ": ".join(dict.fromkeys(str(link) for link in _chain(error) if str(link)))
