"""Durable per-host record of adapter sessions, so a restarted worker takes its sessions back.

One JSONL file per session under the host's spool directory: the first line
is the session header (id, secret, config), then one line per recorded turn
(the ``LedgerDelta`` and the ``TurnSummary``). Invariants:

* a turn's line is written and flushed to the OS before the adapter sends
  that turn's reply, so a SIGKILL after the client saw a reply cannot lose it
  (a reply lost with the process is rolled back when the client retries);
* a torn last line (killed mid-write) is ignored on load;
* finishing a session deletes its file;
* a session whose file would pass ``max_session_bytes`` stops being spooled
  and its file is removed: it still completes normally, it just cannot be
  resumed after a crash;
* each upstream request is written as sent before it goes out and as answered
  once it is over, so a restarted worker knows which requests the dead
  process left running on the policy server (``SpooledSession.in_flight``).

The file holds the session's bearer secret: the directory is created 0700.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.contracts.tokens import TurnSummary
from durable_rollouts.policy.token_capture import LedgerDelta

log = logging.getLogger(__name__)
DEFAULT_MAX_SESSION_BYTES = 512 * 1024 * 1024


@dataclass
class SpooledSession:
    session_id: str
    secret: str
    config: SessionConfig
    turns: list[tuple[LedgerDelta, TurnSummary]]
    # Requests sent upstream and never answered before the process died.
    in_flight: list[str] = dataclasses.field(default_factory=list)


class SessionSpool:
    def __init__(self, directory: Path, max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        self.max_session_bytes = max_session_bytes
        self._files: dict[str, IO[str]] = {}
        self._sizes: dict[str, int] = {}

    def open(self, session_id: str, secret: str, config: SessionConfig) -> None:
        self._write(
            session_id, {"session_id": session_id, "secret": secret, "config": config.model_dump(mode="json")}, mode="w"
        )

    def append(self, session_id: str, delta: LedgerDelta, summary: TurnSummary) -> None:
        if session_id in self._files:
            self._write(session_id, {"delta": dataclasses.asdict(delta), "summary": summary.model_dump(mode="json")})

    def request(self, session_id: str, rid: str, sent: bool) -> None:
        """An upstream request of the session was sent (``sent``) or is over."""
        if session_id in self._files:
            self._write(session_id, {"sent" if sent else "answered": rid})

    def drop(self, session_id: str) -> None:
        handle = self._files.pop(session_id, None)
        self._sizes.pop(session_id, None)
        if handle is not None:
            handle.close()
        self._path(session_id).unlink(missing_ok=True)

    def load(self) -> list[SpooledSession]:
        """Every spooled session, in no particular order; unreadable files are reported and removed."""
        sessions = []
        for path in sorted(self.directory.glob("*.jsonl")):
            try:
                sessions.append(self._read(path))
            except (ValueError, KeyError, TypeError) as error:
                log.warning("spool: dropping unreadable %s: %s", path.name, error)
                path.unlink(missing_ok=True)
        return sessions

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()

    def _write(self, session_id: str, record: dict[str, Any], mode: str = "a") -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        size = self._sizes.get(session_id, 0) + len(line)
        if size > self.max_session_bytes:
            log.warning(
                "spool: session %s passed %d bytes; it will not be resumable after a crash",
                session_id,
                self.max_session_bytes,
            )
            self.drop(session_id)
            return
        handle = self._files.get(session_id)
        if handle is None or mode == "w":
            handle = open(self._path(session_id), mode, encoding="utf-8")
            self._files[session_id] = handle
        handle.write(line)
        handle.flush()
        self._sizes[session_id] = size

    def _read(self, path: Path) -> SpooledSession:
        """Parse one session file, truncating a torn last line so later appends stay readable."""
        data = path.read_bytes()
        header_end = data.index(b"\n") + 1
        header = json.loads(data[:header_end])
        turns, good = [], header_end
        in_flight: dict[str, None] = {}
        for line in data[header_end:].split(b"\n")[:-1]:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break
            if "sent" in record:
                in_flight[str(record["sent"])] = None
            elif "answered" in record:
                in_flight.pop(str(record["answered"]), None)
            else:
                turns.append((LedgerDelta(**record["delta"]), TurnSummary.model_validate(record["summary"])))
            good += len(line) + 1
        if good < len(data):
            with open(path, "r+b") as handle:
                handle.truncate(good)
        session = SpooledSession(
            header["session_id"],
            header["secret"],
            SessionConfig.model_validate(header["config"]),
            turns,
            list(in_flight),
        )
        self._files[session.session_id] = open(path, "a", encoding="utf-8")
        self._sizes[session.session_id] = good
        return session

    def _path(self, session_id: str) -> Path:
        return self.directory / f"{session_id}.jsonl"
