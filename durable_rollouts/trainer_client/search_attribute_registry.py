"""Register the rollout search attributes on a namespace (idempotent).

Temporal's time-skipping test server cannot list attributes; there every
attribute is added, which it accepts.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from workflows.search_attributes import ALL


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add whichever rollout attributes the namespace lacks; return their names."""
    try:
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
        existing = set(listed.custom_attributes)
    except RPCError as error:
        if error.status != RPCStatusCode.UNIMPLEMENTED:
            raise
        existing = set()
    missing = {
        key.name: IndexedValueType.ValueType(int(key.indexed_value_type)) for key in ALL if key.name not in existing
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
