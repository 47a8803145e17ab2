"""``starter.py show --html`` / ``report`` after the demo has stopped: a dev server over the demo's stored state."""

import pytest
from temporalio.client import Client

from durable_rollouts.trainer_client.local_services import DevServer, free_port, port_open, stored_demo_server

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_the_stored_state_is_served_only_when_no_server_is_configured_or_running(tmp_path):
    state, port = tmp_path / "dev.db", free_port()
    async with stored_demo_server({}, state, port) as address:
        assert address is None, "no state file: connect as configured"
    demo = DevServer(port, free_port(), state, ui=False)
    await demo.start()
    try:
        client = await Client.connect(demo.address)
        await client.start_workflow("Recorded", id="kept-by-the-demo", task_queue="nobody-polls")
        async with stored_demo_server({}, state, port) as address:
            assert address is None, "a server already listens on the port: use it"
    finally:
        await demo.stop()
    async with stored_demo_server({"TEMPORAL_ADDRESS": "temporal.example:7233"}, state, port) as address:
        assert address is None, "a configured server is never replaced"
    async with stored_demo_server({}, state, port) as address:
        assert address == f"127.0.0.1:{port}"
        description = await (await Client.connect(address)).get_workflow_handle("kept-by-the-demo").describe()
        assert description.workflow_type == "Recorded", "the workflows the demo ran are there"
    assert not port_open("127.0.0.1", port), "the server started for the block is stopped after it"
