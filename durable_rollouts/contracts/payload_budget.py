"""How large a workflow's own result may be, and how it is kept so.

A workflow's result is encoded by the worker after the workflow returns; one over the payload store's cap
(``ROLLOUT_PAYLOAD_MAX_BYTES``) fails every workflow task that tries to complete it, and the server retries
that task without end. So the workflows keep their results under budgets every allowed cap holds (the
settings refuse a cap below ``MIN_PAYLOAD_CAP_BYTES``):

* a rollout's result whose JSON is over ``ROLLOUT_RESULT_BUDGET_BYTES`` leaves out its agent and grading logs
  (their tails stay);
* a group's result over ``GROUP_RESULT_BUDGET_BYTES`` leaves out its samples' packed trajectories
  (``GroupResult.trajectories_in_children``); each child's own result keeps its trajectory, and the trainer
  side puts them back (``durable_rollouts.trainer_client.sample_payloads``).

What remains is bounded by what activities returned, each already under the cap.
"""

from __future__ import annotations

import pydantic_core
from pydantic import BaseModel

ROLLOUT_RESULT_BUDGET_BYTES = 16 << 20
GROUP_RESULT_BUDGET_BYTES = 24 << 20
MIN_PAYLOAD_CAP_BYTES = 32 << 20


def json_size(model: BaseModel) -> int:
    """The size of ``model`` as the pydantic payload converter encodes it (JSON, UTF-8)."""
    return len(pydantic_core.to_json(model))
