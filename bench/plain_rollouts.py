"""A hand-rolled asyncio rollout driver: the libraries the activities call, wired as ``worker.py`` wires them, no
Temporal.

It is the baseline of ``bench.temporal_cost_bench`` (docs/benchmarks.md, "What Temporal costs"): each rollout makes
the direct calls the workflow's activities make (boot, an adapter session, Claude Code detached under the time and
disk budgets, the diff, destroy, grading in a fresh sandbox, the session's segments) and leaves out what durability
costs: no Temporal server, history, heartbeats, signals, slot reservations or retries; the adapter spools nothing and
the logs, patch and segments stay in memory. A rollout that raises is ``failed`` with the exception; the guard
(``RolloutInput.guard_s``) bounds it.

Run as a long-lived process (like the worker), ``python -m bench.plain_rollouts``: its settings come from the same
environment (``durable_rollouts.config.settings.settings_from_env``), the policy from ``ROLLOUT_POLICY_URL``. It
prints ``plain driver ready`` on stdout, then reads one JSON line per batch from stdin (``{"rollouts":
[{"workflow_id": ..., "input": <RolloutInput>}, ...]}``), runs the batch's rollouts all at once and writes one JSON
line per finished rollout, then ``{"done": true}``. End of stdin stops it. ``PlainDriver`` is the bench's handle on
that process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker

from durable_rollouts.claude_code.agent_wait import AgentLaunch, wait_for_agent
from durable_rollouts.claude_code.binary import find_claude_code
from durable_rollouts.claude_code.harness import ClaudeCodeSettings, judge_run
from durable_rollouts.config.settings import WorkerSettings, settings_from_env
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tokens import SegmentSummary
from durable_rollouts.docker_sandbox import firewall as sandbox_firewall
from durable_rollouts.docker_sandbox.git_workspace import AGENT_JOB, AGENT_LOG
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import swebench
from durable_rollouts.grading.graders import evaluate
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.session_config import session_config_for
from durable_rollouts.trainer_client.local_services import _stop

log = logging.getLogger("plain_rollouts")
LOG_LIMIT_BYTES = 64 * 1024 * 1024
READY_LINE = "plain driver ready"


class PlainHost:
    """The worker's in-process wiring (adapter, sandboxes, Claude Code) without Temporal; ``async with`` starts and
    stops it."""

    def __init__(self, settings: WorkerSettings, policy_url: str):
        self.settings = settings
        self.policy_url = policy_url
        self.claude = ClaudeCodeSettings(extra_args=settings.claude_extra_args, extra_env=settings.claude_extra_env)
        self.adapter: AdapterServer | None = None
        self.sandboxes: DockerSandboxes | None = None
        self.public_url = ""
        self._firewalled = False

    async def __aenter__(self) -> PlainHost:
        settings = self.settings
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=settings.agent_slots * 4 + 8, thread_name_prefix="blocking-io")
        )
        claude_code = await asyncio.to_thread(find_claude_code, settings.cc_tarball, settings.node_tarball)
        renderer = await asyncio.to_thread(PromptRenderer.from_folder, settings.tokenizer_dir)
        docker_client = await asyncio.to_thread(docker.from_env)
        network = await asyncio.to_thread(ensure_network, docker_client)
        self.adapter = AdapterServer(renderer, spool=None, finish_grace_s=settings.finish_grace_s)
        await self.adapter.start(settings.adapter_bind_host or network.gateway, settings.adapter_port)
        self.public_url = f"http://{settings.public_host or network.gateway}:{self.adapter.port}"
        self._firewalled = await asyncio.to_thread(sandbox_firewall.protect, network.bridge, self.adapter.port)
        self.sandboxes = DockerSandboxes(
            SandboxSettings(
                claude_code=claude_code,
                network=network.name,
                grading_offline=settings.grading_offline,
                offline_tools=settings.offline_tools,
                host_queue=settings.host_queue,
                limits=settings.sandbox_limits,
                lifetime_s=settings.budgets.guard_s + 600,
            ),
            client=docker_client,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._firewalled and self.adapter is not None:
            await asyncio.to_thread(sandbox_firewall.revoke_port, self.adapter.port)
        if self.adapter is not None:
            await self.adapter.stop()

    async def rollout(self, workflow_id: str, rollout: RolloutInput) -> dict[str, Any]:
        """One rollout as a plain coroutine; never raises (a failure is ``status: failed``)."""
        started = time.time()
        try:
            async with asyncio.timeout(rollout.guard_s):
                outcome = await self._rollout(workflow_id, rollout)
        except Exception as error:  # noqa: BLE001 - a bench rollout reports what broke it
            outcome = {"status": "failed", "error": f"{type(error).__name__}: {error}"[:500]}
        return {"workflow_id": workflow_id, "elapsed_s": time.time() - started, **outcome}

    async def _rollout(self, workflow_id: str, rollout: RolloutInput) -> dict[str, Any]:
        assert self.adapter is not None and self.adapter.registry is not None and self.sandboxes is not None
        registry, sandboxes, task = self.adapter.registry, self.sandboxes, rollout.task
        if task.grader == "swebench":  # checked before the boot, as the boot activity does
            await swebench.require_eval_script(task)
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=1))
        session_id: str | None = None
        try:
            config = session_config_for(
                rollout.policy, self.policy_url, True, f"{workflow_id}#1", parsers=self.settings.parser_defaults
            )
            ticket = registry.open_session(config, durable=False)
            session_id = ticket.session_id
            launch = AgentLaunch.for_session(self.claude, self.public_url, ticket.secret, rollout.policy.context_budget)
            agent_started = time.time()
            disk_bytes = sandboxes.limits_for(task).disk_bytes
            exit_code, stopped = await wait_for_agent(
                sandboxes, handle, disk_bytes, launch, deadline=agent_started + rollout.agent_budget_s
            )
            if exit_code is None:
                await sandboxes.kill_detached(handle, AGENT_JOB)
            agent_log = await sandboxes.read_file(handle, AGENT_LOG, LOG_LIMIT_BYTES)
            verdict = judge_run(
                agent_log.decode(errors="replace").splitlines(), exit_code if exit_code is not None else -1
            )
            agent_s = time.time() - agent_started
            captured = await sandboxes.capture_diff(handle)
        except BaseException:
            if session_id is not None:
                with contextlib.suppress(Exception):
                    await registry.finish_session(session_id, grace_s=0)
            raise
        finally:
            await sandboxes.destroy(handle)
        try:
            if captured.report.over_cap:  # not graded, as in the workflow: reward 0 without a grading sandbox
                reward, solved = 0.0, False
            else:
                graded = await evaluate(
                    sandboxes,
                    EvalRequest(
                        task=task, diff=captured.diff, workflow_id=workflow_id, timeout_s=rollout.eval_timeout_s
                    ),
                )
                reward, solved = graded.result.reward, graded.result.solved
        except BaseException:
            with contextlib.suppress(Exception):
                await registry.finish_session(session_id, grace_s=0)
            raise
        merged = await registry.finish_session(session_id)
        summaries = [SegmentSummary.of(segment) for segment in merged.segments]
        if not summaries:
            return {"status": "aborted", "abort_reason": "adapter_session_empty", "reward": 0.0, "solved": False}
        return {
            "status": "completed",
            "reward": reward,
            "solved": solved,
            "agent_reason": stopped or verdict.reason,
            "agent_s": agent_s,
            "turns": len(merged.turns),
            "segments": len(summaries),
            "sampled_tokens": sum(s.n_sampled for s in summaries),
        }


async def _serve(host: PlainHost) -> None:
    """Batches from stdin, results to stdout (module docstring)."""
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(READY_LINE, flush=True)
    while line := await reader.readline():
        batch = json.loads(line)

        async def one(item: dict[str, Any]) -> None:
            result = await host.rollout(item["workflow_id"], RolloutInput.model_validate(item["input"]))
            print(json.dumps(result), flush=True)

        await asyncio.gather(*(one(item) for item in batch["rollouts"]))
        print(json.dumps({"done": True}), flush=True)


async def main_async() -> None:
    settings = settings_from_env()
    policy_url = settings.policy_url
    if not policy_url:
        sys.exit("plain driver: ROLLOUT_POLICY_URL is not set")
    async with PlainHost(settings, policy_url) as host:
        await _serve(host)


class PlainDriver:
    """This module as a subprocess in its own process group, from the bench's side: ``async with`` starts it and waits
    for its ready line, ``run`` hands a batch over and collects its results, leaving the block ends its stdin and stops
    it."""

    def __init__(self, env: dict[str, str], log_path: Path):
        self.env, self.log_path = env, log_path
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> PlainDriver:
        with open(self.log_path, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.plain_rollouts",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=PROJECT_ROOT,
                start_new_session=True,
                env={**os.environ, **self.env},
                limit=64 * 1024 * 1024,
            )
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 180)
        if line.decode().strip() != READY_LINE:
            raise RuntimeError(f"plain driver did not start (exit {self.proc.returncode}); see {self.log_path}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 30)
        await _stop(self.proc)

    async def run(
        self, batch: list[tuple[str, RolloutInput]], on_result: Callable[[str, dict[str, Any]], None]
    ) -> None:
        """Hand the batch over in one line; call ``on_result(workflow_id, result)`` as each line comes back."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        line = {"rollouts": [{"workflow_id": wid, "input": r.model_dump(mode="json")} for wid, r in batch]}
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        await self.proc.stdin.drain()
        while raw := await self.proc.stdout.readline():
            result = json.loads(raw)
            if result.get("done"):
                return
            on_result(result["workflow_id"], result)
        raise RuntimeError(f"plain driver exited with {await self.proc.wait()} mid-batch; see {self.log_path}")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    asyncio.run(main_async())


if __name__ == "__main__":
    main()
