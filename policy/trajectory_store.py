"""Claim-check store for token segments: packed arrays on a filesystem, refs through Temporal.

A 100k-token trajectory is ~2.7 MiB as JSON, beyond Temporal's 2 MiB payload
limit. Here it is packed (int32 ids, uint8 mask, float64 log-probs, bit-exact
as the server sent them; the rest of each segment, its weight version spans
included, as JSON beside them: a file written before spans existed reads
with none), compressed, and kept out of workflow history: only a
``TrajectoryRef`` (uri, sha256, sizes) travels through Temporal. Beside a
rollout's segments lie its agent's stream-json log (``put_log``) and, per
attempt, the patch it was graded on (``put_patch``, a ``PatchRef`` claim
check), which ``starter.py regrade`` grades again, and each grading's whole
log (``put_grading_log``, one file per grading activity attempt). Segments and patches are
written atomically (temp file + rename) and verified by hash on load. The
directory must be shared by the workers and the starter
(local disk for one host, a shared filesystem for a cluster).

Any key names a file directly in the store's root: a key made only of ASCII
letters, digits, ``-``, ``_`` and ``.`` (at most 120 characters, not starting
with ``.``) is used as is; any other key (non-ASCII, ``/``, ``..``, very long)
becomes its ASCII-safe prefix plus 16 hex digits of its SHA-256, so distinct
keys never share a file and no key reaches outside the root. A ref's ``uri``
is a ``file://`` URI (percent-encoded where the path needs it) that ``load``
decodes back to the same path.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from contracts.rollout import PatchRef, TokenSegment, TrajectoryRef

PLAIN_KEY = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}")


class TrajectoryStore:
    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()

    def put(self, key: str, segments: list[TokenSegment]) -> TrajectoryRef:
        payload = encode_segments(segments)
        path = self._write_atomically(f"{_safe(key)}.npz", payload)
        return TrajectoryRef(
            uri=path.as_uri(),
            sha256=hashlib.sha256(payload).hexdigest(),
            n_segments=len(segments),
            n_tokens=sum(len(s.tokens) for s in segments),
            nbytes=len(payload),
        )

    def put_patch(self, key: str, patch: str) -> PatchRef:
        """Keep an agent's patch beside its trajectory (``<key>.patch``, UTF-8), written atomically like ``put``."""
        payload = patch.encode("utf-8", errors="surrogatepass")
        path = self._write_atomically(f"{_safe(key)}.patch", payload)
        return PatchRef(path=str(path), sha256=hashlib.sha256(payload).hexdigest(), nbytes=len(payload))

    def load_patch(self, ref: PatchRef) -> str:
        """The patch ``ref`` names, verified by its hash; ``ValueError`` when it lies outside this store or was
        altered, ``OSError`` when unreadable."""
        path = Path(ref.path).resolve()
        if path.parent != self.root or not path.name.endswith(".patch"):
            raise ValueError(f"patch {ref.path}: not a patch in the trajectory store {self.root}")
        payload = path.read_bytes()
        if hashlib.sha256(payload).hexdigest() != ref.sha256:
            raise ValueError(f"patch {ref.path}: sha256 mismatch")
        return payload.decode("utf-8", errors="surrogatepass")

    def put_log(self, key: str, data: bytes) -> Path:
        """Keep an agent's stream-json log beside its trajectory (``<key>.log.jsonl``)."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{_safe(key)}.log.jsonl"
        path.write_bytes(data)
        return path

    def _write_atomically(self, name: str, payload: bytes) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / name
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
        return path

    def put_grading_log(self, key: str, log: str) -> Path:
        """Keep a grading's whole log (``<key>.grading.log``), written atomically; a key names one grading."""
        return self._write_atomically(f"{_safe(key)}.grading.log", log.encode("utf-8", errors="replace"))

    @staticmethod
    def load(ref: TrajectoryRef) -> list[TokenSegment]:
        parsed = urlparse(ref.uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise ValueError(f"trajectory uri {ref.uri!r}: only local file:// URIs are supported")
        payload = Path(unquote(parsed.path, errors="surrogateescape")).read_bytes()
        if hashlib.sha256(payload).hexdigest() != ref.sha256:
            raise ValueError(f"trajectory {ref.uri}: sha256 mismatch")
        return decode_segments(payload)


def encode_segments(segments: list[TokenSegment]) -> bytes:
    lengths = np.array([len(s.tokens) for s in segments], dtype=np.int64)
    meta = [s.model_dump(exclude={"tokens", "loss_mask", "rollout_log_probs"}) for s in segments]
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        tokens=np.array([t for s in segments for t in s.tokens], dtype=np.int32),
        loss_mask=np.array([m for s in segments for m in s.loss_mask], dtype=np.uint8),
        log_probs=np.array([p for s in segments for p in s.rollout_log_probs], dtype=np.float64),
        lengths=lengths,
        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
    )
    return buffer.getvalue()


def decode_segments(payload: bytes) -> list[TokenSegment]:
    with np.load(io.BytesIO(payload)) as arrays:
        meta = json.loads(arrays["meta"].tobytes())
        bounds = np.concatenate([[0], np.cumsum(arrays["lengths"])])
        tokens, mask, log_probs = arrays["tokens"], arrays["loss_mask"], arrays["log_probs"]
        return [
            TokenSegment(
                **info,
                tokens=tokens[a:b].tolist(),
                loss_mask=mask[a:b].tolist(),
                rollout_log_probs=[float(x) for x in log_probs[a:b]],
            )
            for info, a, b in zip(meta, bounds[:-1], bounds[1:], strict=False)
        ]


def _safe(key: str) -> str:
    """The file name stem for ``key``: the key itself when plain, else an ASCII prefix plus a hash of the exact key."""
    if PLAIN_KEY.fullmatch(key):
        return key
    digest = hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    prefix = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in key[:80])
    return f"{prefix}-{digest}"
