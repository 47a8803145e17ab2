"""Running many: one result per item in input order, a concurrency cap, and a failing result handler that ends
nothing."""

import asyncio
import logging
from types import SimpleNamespace

import pytest

from durable_rollouts.trainer_client.workflow_runs import run_limited, server_wait_from_env


async def test_a_result_handler_that_raises_is_logged_and_every_item_still_gets_its_result(caplog):
    in_flight, peak, handled = 0, 0, []

    async def run_one(index: int):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01 * (5 - index))
        in_flight -= 1
        return SimpleNamespace(workflow_id=f"wf-{index}", index=index)

    async def on_result(result):
        if result.index == 2:
            raise OSError("disk full")
        handled.append(result.index)

    with caplog.at_level(logging.ERROR, logger="durable_rollouts.trainer_client.workflow_runs"):
        results = await run_limited(range(5), run_one, concurrency=2, on_result=on_result)
    assert [r.index for r in results] == [0, 1, 2, 3, 4] and sorted(handled) == [0, 1, 3, 4] and peak == 2
    assert "handling the result of wf-2 failed" in caplog.text and "disk full" in caplog.text


def test_the_server_wait_setting():
    assert server_wait_from_env({}) == 300.0 and server_wait_from_env({"ROLLOUT_SERVER_WAIT_S": "2.5"}) == 2.5
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(ValueError, match="ROLLOUT_SERVER_WAIT_S"):
            server_wait_from_env({"ROLLOUT_SERVER_WAIT_S": bad})
