"""A rollout page read from a real dev server while no worker runs (the demo's stored state after the demo stopped)."""

from datetime import timedelta

import pytest

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client import rollout_pages
from durable_rollouts.trainer_client.rollout_runs import rollout_input, start_rollout
from durable_rollouts.trajectory_view.rollout_page import PageSettings
from durable_rollouts.trajectory_view.token_text import TokenTexts
from tests.local_cluster import start_dev_server

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_a_running_rollout_no_worker_answers_for_still_gets_its_page(tmp_path, monkeypatch):
    monkeypatch.setattr(rollout_pages, "QUERY_TIMEOUT", timedelta(seconds=1))
    env = await start_dev_server()
    try:
        task = next(row.task for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow))
        handle = await start_rollout(
            env.client, rollout_input(task, 0, 0, PolicySpec(), RolloutBudgets()), "nobody", task_queue="nobody-polls"
        )
        settings = PageSettings(TokenTexts.from_dir(ensure_qwen_tokenizer()), ContractChoice("current", "test"))
        view = await rollout_pages.write_rollout_page(env.client, handle.id, tmp_path / "running.html", settings)
    finally:
        await env.shutdown()
    assert (view.state, view.progress, view.result) == ("RUNNING", None, None)
    assert view.trajectory_note.startswith("no worker answered for its progress"), view.trajectory_note
    page = (tmp_path / "running.html").read_text()
    assert (
        "still running; no worker answered for its progress" in page
        and "No activity in the workflow's history." in page
    )
