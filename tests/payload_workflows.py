"""A workflow and activity that move one payload of a chosen size through Temporal, for the external-storage tests.

The module imports only temporalio and pydantic, so the workflow sandbox loads it as it is."""

from __future__ import annotations

import os
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError


class Blob(BaseModel):
    attempt: int
    data: str


class BlobOutcome(BaseModel):
    blob: Blob | None = None
    error_type: str = ""
    error_message: str = ""
    non_retryable: bool = False


@activity.defn
async def make_blob(size: int) -> Blob:
    """``size`` incompressible-looking characters (hex of random bytes), tagged with the attempt."""
    return Blob(attempt=activity.info().attempt, data=os.urandom(size // 2).hex())


@workflow.defn
class BlobRoundTrip:
    """Runs ``make_blob`` (up to 12 attempts, backoff from 1 s doubling to 4 s) and returns its blob, or the error it
    ended with."""

    @workflow.run
    async def run(self, size: int) -> BlobOutcome:
        try:
            blob = await workflow.execute_activity(
                make_blob,
                size,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=4),
                    maximum_attempts=12,
                ),
            )
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError):
                return BlobOutcome(
                    error_type=cause.type or "", error_message=cause.message, non_retryable=cause.non_retryable
                )
            raise
        return BlobOutcome(blob=blob)
