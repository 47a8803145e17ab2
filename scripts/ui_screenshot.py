"""Screenshot the Temporal Web UI showing a running rollout (headless Debian Chromium, no downloads).

Starts a private dev server (port 7243, UI 8243), a worker and a slow scripted
policy, starts one rollout, waits until its agent has taken a model turn, then
saves two pages: the filtered workflow list (``RolloutStage='agent'``) and the
workflow's own page (search attributes, current details, pending activity with
its heartbeat details). Finally it cancels the rollout gracefully and stops
everything. Images go to ``results/ui/`` (not committed).

    apt-get install -y chromium        # once
    .venv/bin/python -m scripts.ui_screenshot [OUT_DIR]
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import quote

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.paths import (
    EXAMPLE_DATASET,
    PROJECT_ROOT,
)
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.local_services import temporal_dev_server, worker_process
from durable_rollouts.trainer_client.rollout_queries import request_abort
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input, start_rollout
from workflows.coding_agent_rollout import CodingAgentRollout

PORT, UI_PORT = 7243, 8243
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1600,1300",
    "--virtual-time-budget=8000",
]


async def screenshot(url: str, path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = await asyncio.create_subprocess_exec(
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={path}",
            url,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.wait_for(proc.wait(), timeout=120)
    print(f"saved {path}  ({url})", flush=True)


async def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    renderer = PromptRenderer.from_folder(ensure_qwen_tokenizer())
    policy = ScriptedPolicyServer(
        renderer, default_policy="slow", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=90.0
    )
    policy_url = await policy.start()
    queue = f"ui-shot-{uuid.uuid4().hex[:6]}"
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    try:
        with tempfile.TemporaryDirectory(prefix="ui-shot-") as state:
            async with temporal_dev_server(PORT, UI_PORT, Path(state) / "dev.db") as address:
                env = {"ROLLOUT_POLICY_URL": policy_url, "ROLLOUT_TASK_QUEUE": queue, "ROLLOUT_RESULTS_DIR": state}
                async with worker_process(address, ["--host-id", "ui-shot", "--adapter-port", "0"], env=env):
                    client = await connect(address)
                    rollout = rollout_input(
                        task,
                        0,
                        0,
                        PolicySpec(policy_tag="scripted-slow"),
                        RolloutBudgets(agent_budget_s=300, eval_timeout_s=120, guard_s=600),
                    )
                    handle = await start_rollout(client, rollout, f"ui{uuid.uuid4().hex[:4]}", queue)
                    while (await handle.query(CodingAgentRollout.progress)).turns < 1:
                        await asyncio.sleep(0.5)
                    base = f"http://127.0.0.1:{UI_PORT}/namespaces/default/workflows"
                    agent_filter = quote("RolloutStage='agent'")
                    await screenshot(f"{base}?query={agent_filter}", out_dir / "workflow-list.png")
                    await screenshot(f"{base}/{handle.id}", out_dir / "workflow-page.png")
                    await request_abort(client, handle.id)
                    result = await handle.result()
                    print(f"rollout {handle.id}: {result.status} {result.abort_reason}")
    finally:
        await policy.stop()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else PROJECT_ROOT / "results" / "ui"))
