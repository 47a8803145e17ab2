"""Live adapter sessions by id: minting their bearer tokens, authenticating requests, claims by agent activities.

Invariants:
* a token is ``<session id>.<secret>``; secrets are compared in constant time, and a finished
  session keeps only its secret's SHA-256 (for the last ``FINISHED_KEPT`` sessions);
* a wrong secret reads as ``UnknownSession`` whether or not the session exists; only a finished
  session's own secret reads as ``ClosedSession``;
* finishing a session twice returns the same result;
* finishing closes the session to new requests at once (its own secret then reads as
  ``ClosedSession``); its turns in flight get up to ``finish_grace_s`` (``FINISH_GRACE_S``,
  the worker's ``ROLLOUT_FINISH_GRACE_S``) to end and are recorded if they do; the rest are
  cut and their upstream requests aborted (``PolicySession.close``); the segments are taken
  only after every turn has ended, and the result says how many turns were waited for and
  how many were aborted (``SessionResult.finish``). With nothing in flight it does not wait.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from durable_rollouts.contracts.session import FINISH_GRACE_S, SessionConfig, SessionResult, SessionTicket
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.policy_clients import PolicyClient, PolicyClients
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.session import PolicySession, RequestJournal, TurnJournal
from durable_rollouts.policy.session_spool import SessionSpool

log = logging.getLogger(__name__)
FINISHED_KEPT = 64


class UnknownSession(LookupError):
    pass


def _secret_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class ClosedSession(LookupError):
    pass


@dataclass
class _Entry:
    secret: str
    session: PolicySession


class SessionRegistry:
    """Live sessions by id, plus the most recent finished results (so finishing twice is harmless).

    Finished results are kept for the last ``FINISHED_KEPT`` sessions only; an
    older finished session's token then reads as unknown (401), not closed (409).

    A live session is *unclaimed* while no agent activity holds it: restored
    from the spool after a restart, or let go by an agent activity that was
    cancelled for a reason other than its workflow asking (lost heartbeat,
    server restart), so that the retry can take it back. Unclaimed sessions
    keep serving their agent until ``claim``; ``forget_unclaimed`` finishes
    those nobody claimed. Agent slots (``live_count``): a restored session
    holds none until claimed (its rollout may have moved on while the worker
    was down); a let-go session keeps its slot, because its agent is still
    running and its retry is on the way (so a host never takes more agents
    than its slots while a server restart's retries arrive).
    """

    def __init__(
        self,
        renderer: PromptRenderer,
        clients: PolicyClients,
        executor: FairExecutor,
        spool: SessionSpool | None = None,
        finish_grace_s: float = FINISH_GRACE_S,
    ):
        self.renderer = renderer
        self.finish_grace_s = finish_grace_s
        self._clients = clients
        self.executor = executor
        self._spool = spool
        self._live: dict[str, _Entry] = {}
        self._finished: OrderedDict[str, SessionResult] = OrderedDict()
        self._finished_secrets: dict[str, bytes] = {}  # session id -> SHA-256 of its secret, while its result is kept
        self._unclaimed: dict[str, float] = {}  # session id -> time.monotonic() when it became unclaimed
        self._orphans: list[
            tuple[SessionConfig, str]
        ] = []  # (session config, rid) the dead process left running upstream
        self._slotless: set[str] = set()  # restored sessions not claimed yet: they hold no agent slot
        self._holders: dict[str, int] = {}  # session id -> the activity attempt that claimed it last
        self._finishing: dict[str, asyncio.Future[SessionResult]] = {}  # sessions closed, their turns still ending

    def open_session(self, config: SessionConfig, durable: bool = True) -> SessionTicket:
        """Mint a session; ``durable`` sessions are spooled so a restarted worker can resume them."""
        session_id = f"s{secrets.token_hex(8)}"
        secret = secrets.token_urlsafe(32)
        spool = self._spool if durable else None
        self._live[session_id] = _Entry(secret=secret, session=self._new_session(session_id, config, spool))
        if spool is not None:
            spool.open(session_id, secret, config)
        return SessionTicket(session_id=session_id, secret=f"{session_id}.{secret}")

    def restore_spooled(self) -> list[str]:
        """Take back the sessions this host spooled before a restart; returns their ids."""
        if self._spool is None:
            return []
        restored = []
        for spooled in self._spool.load():
            session = self._new_session(spooled.session_id, spooled.config, self._spool)
            session.restore(spooled.turns)
            self._orphans += [(spooled.config, rid) for rid in spooled.in_flight]
            self._live[spooled.session_id] = _Entry(secret=spooled.secret, session=session)
            restored.append(spooled.session_id)
        self._unclaimed.update(dict.fromkeys(restored, time.monotonic()))
        self._slotless.update(restored)
        return restored

    def claim(self, session_id: str, holder: int = 0) -> PolicySession | None:
        """An activity (``holder``: its attempt number) takes a live session; an unclaimed one then holds a slot again.

        The last claim wins: a retry that re-attached holds the session even if the attempt it superseded
        learns of its own cancellation later (``held_by`` tells that attempt it no longer holds it). A session being
        finished is gone for claims: its turns are ending and its segments are taken, so a retry must start afresh."""
        if not self.resumable(session_id):
            return None
        self._unclaimed.pop(session_id, None)
        self._slotless.discard(session_id)
        self._holders[session_id] = holder
        return self.get(session_id)

    def held_by(self, session_id: str, holder: int) -> bool:
        return self.resumable(session_id) and self._holders.get(session_id) == holder

    def resumable(self, session_id: str) -> bool:
        """The session is live and not being finished (a retry may re-attach to it)."""
        entry = self._live.get(session_id)
        return entry is not None and not entry.session.closed

    def unclaim(self, session_id: str) -> None:
        """The activity holding a live session lets go of it without finishing it (a retry may claim it)."""
        if session_id in self._live:
            self._holders.pop(session_id, None)
            self._unclaimed.setdefault(session_id, time.monotonic())

    async def forget_unclaimed(self, older_than_s: float = 0.0) -> list[str]:
        """Finish sessions left unclaimed for at least ``older_than_s`` (their rollouts moved on or are gone), aborting
        their turns in flight at once; returns their ids."""
        cutoff = time.monotonic() - older_than_s
        forgotten = sorted(s for s, since in self._unclaimed.items() if since <= cutoff)
        live = [s for s in forgotten if s in self._live]
        for session_id in live:
            self._live[session_id].session.closed = True  # all closed before the first await: none can be claimed now
        self._unclaimed = {s: since for s, since in self._unclaimed.items() if s not in forgotten}
        self._slotless.difference_update(forgotten)
        await asyncio.gather(*(self.finish_session(s, grace_s=0) for s in live))
        return forgotten

    def _new_session(self, session_id: str, config: SessionConfig, spool: SessionSpool | None) -> PolicySession:
        client = self.policy_client(config)
        if spool is None:
            return PolicySession(session_id, config, self.renderer, client, self.executor)
        journal: TurnJournal = functools.partial(spool.append, session_id)
        requests: RequestJournal = functools.partial(spool.request, session_id)
        return PolicySession(session_id, config, self.renderer, client, self.executor, journal, requests)

    async def abort_orphaned_requests(self) -> int:
        """Abort upstream the requests the dead process left running (restored from the spool), so the engine stops
        spending on replies nobody will read; how many were aborted (an abort of one already over is harmless)."""
        orphans, self._orphans = self._orphans, []
        await asyncio.gather(*(self.policy_client(config).abort(config.policy_url, rid) for config, rid in orphans))
        return len(orphans)

    def authenticate(self, token: str) -> PolicySession:
        """The live session the token opens; ``ClosedSession`` only for a finished one's *right* secret, else
        ``UnknownSession``."""
        session_id, _, secret = token.partition(".")
        entry = self._live.get(session_id)
        if entry is not None and hmac.compare_digest(entry.secret.encode(), secret.encode()):
            if entry.session.closed:
                raise ClosedSession(session_id)
            return entry.session
        finished = self._finished_secrets.get(session_id)
        if entry is None and finished is not None and hmac.compare_digest(finished, _secret_digest(secret)):
            raise ClosedSession(session_id)
        raise UnknownSession()

    def get(self, session_id: str) -> PolicySession | None:
        entry = self._live.get(session_id)
        return entry.session if entry else None

    async def finish_session(self, session_id: str, grace_s: float | None = None) -> SessionResult:
        """Close the session, let its turns in flight end (up to ``grace_s``, default ``finish_grace_s``; 0 aborts
        them at once), then take its segments (module docstring). The first call's bound holds: a call while it
        finishes, or after, gets the same result. The finish runs on even if the caller is cancelled."""
        self._unclaimed.pop(session_id, None)
        self._slotless.discard(session_id)
        self._holders.pop(session_id, None)
        if session_id in self._finished:
            return self._finished[session_id]
        finishing = self._finishing.get(session_id)
        if finishing is None:
            entry = self._live.get(session_id)
            if entry is None:
                raise KeyError(f"unknown session {session_id}")
            entry.session.closed = True  # no new request from here, even before the task below starts
            bound = self.finish_grace_s if grace_s is None else grace_s
            finishing = self._finishing[session_id] = asyncio.ensure_future(self._finish(session_id, entry, bound))
        return await asyncio.shield(finishing)

    async def _finish(self, session_id: str, entry: _Entry, grace_s: float) -> SessionResult:
        try:
            report = await entry.session.close(grace_s)
        finally:
            self._live.pop(session_id, None)
            self._finishing.pop(session_id, None)
        result = SessionResult(
            session_id=session_id,
            segments=entry.session.ledger.finish(),
            turns=entry.session.turns,
            turn_log=entry.session.ledger.turn_log(),
            replay=entry.session.ledger.replay(),
            config=entry.session.config,
            finish=report,
        )
        if report.aborted:
            log.info(
                "session %s finished: waited for %d turn(s), aborted %d: %s",
                session_id,
                report.waited,
                report.aborted,
                report.aborted_rids,
            )
        if self._spool is not None:
            self._spool.drop(session_id)
        self._finished[session_id] = result
        self._finished_secrets[session_id] = _secret_digest(entry.secret)
        while len(self._finished) > FINISHED_KEPT:
            evicted, _ = self._finished.popitem(last=False)
            self._finished_secrets.pop(evicted, None)
        return result

    def policy_client(self, config: SessionConfig) -> PolicyClient:
        """The client of the engine ``config`` names."""
        return self._clients[config.engine]

    @property
    def live_count(self) -> int:
        """Live sessions that hold an agent slot: all but the restored ones nobody claimed yet."""
        return len(self._live) - len(self._slotless)
