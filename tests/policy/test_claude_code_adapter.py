"""The real Claude Code binary against the adapter and the scripted policy, in a git repo on the host.

Acceptance for the adapter: with ``oracle`` the repository ends up patched and
the CLI exits 0; with ``noop`` nothing changes. Either way the finished
session's segments contain exactly the tokens the policy server sampled (ids
and log-probs) with loss_mask 1, and 0 everywhere else.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio

from durable_rollouts.claude_code.binary import find_claude_binary
from durable_rollouts.claude_code.harness import ClaudeCodeSettings, claude_code_argv, claude_code_env, judge_run
from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.scripted_policy.server import OracleTask, ScriptedPolicyServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PROBLEM = "calc.add() subtracts its arguments instead of adding them."
BUGGY = "def add(a, b):\n    return a - b\n"
PATCH = textwrap.dedent(
    """\
    diff --git a/calc.py b/calc.py
    --- a/calc.py
    +++ b/calc.py
    @@ -1,2 +1,2 @@
     def add(a, b):
    -    return a - b
    +    return a + b
    """
)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text(BUGGY)
    (repo / "PROBLEM_STATEMENT.md").write_text(PROBLEM + "\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "calc.py"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    return repo


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def oracle_server(renderer):
    server = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=[OracleTask(match="subtracts its arguments", patch=PATCH)]
    )
    server.url = await server.start()
    yield server
    await server.stop()


async def run_claude(adapter: AdapterServer, secret: str, repo: Path, home: Path) -> tuple[int, list[str]]:
    settings = ClaudeCodeSettings(max_retries=1, max_turns=8)
    env = {
        "PATH": os.environ["PATH"],
        "CLAUDE_CODE_TMPDIR": str(home),
        **claude_code_env(adapter.url, secret, str(home), 65536, settings),
    }
    proc = await asyncio.create_subprocess_exec(
        *claude_code_argv(str(find_claude_binary()), settings),
        cwd=repo,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), timeout=180)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, stdout.decode(errors="replace").splitlines()


def sampled_runs(segment) -> list[tuple[list[int], list[float]]]:
    runs, i = [], 0
    while i < len(segment.tokens):
        if not segment.loss_mask[i]:
            i += 1
            continue
        j = i
        while j < len(segment.tokens) and segment.loss_mask[j]:
            j += 1
        runs.append((segment.tokens[i:j], segment.rollout_log_probs[i:j]))
        i = j
    return runs


def assert_exactly_the_sampled_tokens(result, records):
    sampled = [(r.output_ids, r.output_logprobs) for r in records if r.finish_reason["type"] in ("stop", "length")]
    captured = [run for segment in result.segments for run in sampled_runs(segment)]
    assert captured == sampled
    for segment in result.segments:
        assert sum(segment.loss_mask) == sum(len(ids) for ids, _ in sampled_runs(segment))
        assert all(lp == 0.0 for lp, m in zip(segment.rollout_log_probs, segment.loss_mask, strict=True) if not m)


@pytest.mark.parametrize("policy", ["oracle", "noop"])
async def test_claude_code_runs_against_the_adapter(adapter, oracle_server, tmp_path, policy):
    repo = make_repo(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    ticket = adapter.registry.open_session(
        SessionConfig(policy_url=oracle_server.url, sampling=SamplingParams(max_new_tokens=2048), context_budget=65536)
    )
    oracle_server.set_policy(ticket.session_id, policy)

    exit_code, lines = await run_claude(adapter, ticket.secret, repo, home)
    verdict = judge_run(lines, exit_code)
    result = await adapter.registry.finish_session(ticket.session_id)

    assert exit_code == 0 and verdict.reason == "completed", "\n".join(lines[-5:])
    fixed = (repo / "calc.py").read_text()
    if policy == "oracle":
        assert fixed == BUGGY.replace("a - b", "a + b")
        assert [t.tool_names for t in result.turns] == [["Read"], ["Bash"], []]
    else:
        assert fixed == BUGGY
        assert len(result.turns) == 1
    assert_exactly_the_sampled_tokens(result, oracle_server.records_for(ticket.session_id))
    assert len(result.segments) == 1, "an agent loop without compaction or sub-agents stays one segment"
