"""The adapter's Temporal face: the activities that collect an adapter session once its agent is done.

The adapter itself (its HTTP server, sessions and token capture) is ``durable_rollouts.policy``; the
worker runs one ``AdapterServer`` and registers these on its host queue, since a session lives on the
worker whose adapter recorded it.

``merge_segments`` finishes the session with the worker's finish bound (``ROLLOUT_FINISH_GRACE_S``: turns
still in flight get that long to be recorded, then are aborted upstream; no wait when none is in flight),
judges its staleness bound once (a retried merge stores and reports the same verdict) and returns its
segments packed. ``discard_session`` finishes a session whose segments are not wanted, aborting its turns
in flight at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from temporalio import activity

from activities import metrics
from durable_rollouts.contracts.agent_runs import MergeRequest, MergeResult
from durable_rollouts.contracts.session import SessionResult, StalenessReport
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.contracts.weight_versions import is_integer_version
from durable_rollouts.policy import staleness
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.sglang_client import PolicyServerError
from durable_rollouts.policy.trajectory_packing import pack_trajectory

log = logging.getLogger(__name__)
VERDICTS_KEPT = 256
# How long a merge waits for the server's version for the lag metric alone (no staleness bound asked for it).
VERSION_LAG_READ_S = 5.0


class AdapterActivities:
    """Activities over this worker's ``AdapterServer`` sessions."""

    def __init__(self, adapter: AdapterServer):
        self.adapter = adapter
        # The staleness verdict per merged session: a retried merge stores and reports the same one.
        self._verdicts: OrderedDict[str, tuple[list[TokenSegment], StalenessReport | None]] = OrderedDict()

    @activity.defn(name="merge_segments")
    async def merge_segments(self, request: MergeRequest) -> MergeResult:
        """Finish the session, judge its staleness bound (once per session: a retry stores and reports the
        same verdict) and return its segments packed, with their summaries; the first merge of a session
        records its policy-version lag (``activities.metrics``)."""
        registry = self.adapter.registry
        assert registry is not None
        result = await registry.finish_session(request.session_id)
        if not result.segments:
            return MergeResult(trajectory=None, segments=[], turns=len(result.turns), finish=result.finish)
        verdict = self._verdicts.get(request.session_id)
        if verdict is None:
            verdict = await self._judged(result)
            await self._report_version_lag(result, verdict[1])
        segments, report = verdict
        self._verdicts[request.session_id] = (segments, report)
        while len(self._verdicts) > VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        trajectory = await asyncio.to_thread(pack_trajectory, segments, result.turn_log, result.replay)
        summaries = await asyncio.to_thread(lambda: [SegmentSummary.of(s) for s in segments])
        return MergeResult(
            trajectory=trajectory, segments=summaries, turns=len(result.turns), staleness=report, finish=result.finish
        )

    async def _judged(self, result: SessionResult) -> tuple[list[TokenSegment], StalenessReport | None]:
        """The segments under the session's staleness bound, judged against the policy server's version now;
        a server that cannot say leaves them as sampled, with an unjudged report (the rollout is not lost)."""
        if result.config is None or result.config.staleness is None:
            return result.segments, None
        bound = result.config.staleness
        registry = self.adapter.registry
        assert registry is not None
        try:
            current = await registry.policy_client(result.config).current_weight_version(result.config.policy_url)
        except PolicyServerError as error:
            log.warning("staleness of session %s not judged: %s", result.session_id, error)
            return result.segments, staleness.unjudged(result.segments, bound, str(error))
        return await asyncio.to_thread(staleness.judge, result.segments, bound, current)

    async def _report_version_lag(self, result: SessionResult, report: StalenessReport | None) -> None:
        """Record how many weight versions the session's oldest sampled token lies behind the server's version
        now (integer versions only; the staleness verdict's reading of the server if it made one). Nothing is
        recorded when either is not an integer or the server cannot say within ``VERSION_LAG_READ_S``."""
        versions = [
            v
            for segment in result.segments
            for v in segment.token_weight_versions()
            if v is not None and is_integer_version(v)
        ]
        if not versions or result.config is None:
            return
        current = report.current_version if report is not None else None
        if current is None:
            registry = self.adapter.registry
            assert registry is not None
            try:
                current = await asyncio.wait_for(
                    registry.policy_client(result.config).current_weight_version(result.config.policy_url),
                    VERSION_LAG_READ_S,
                )
            except (PolicyServerError, TimeoutError) as error:
                log.debug("policy-version lag of session %s not recorded: %s", result.session_id, error)
                return
        if is_integer_version(current) and int(current) >= min(map(int, versions)):
            metrics.record_version_lag(int(current) - min(map(int, versions)))

    @activity.defn(name="discard_session")
    async def discard_session(self, session_id: str) -> None:
        registry = self.adapter.registry
        if registry is not None:
            try:
                await registry.finish_session(session_id, grace_s=0)  # its segments are not wanted
            except KeyError:
                pass
