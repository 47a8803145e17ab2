"""How every process of the project reaches Temporal: ``temporalio.envconfig``, the convention the ``temporal``
CLI and the SDKs share.

Invariants:

* One source of connection settings for the worker, the starter and the slime drop-ins: the profile of a
  ``temporal.toml`` (``TEMPORAL_CONFIG_FILE``, default ``~/.config/temporalio/temporal.toml``; profile
  ``TEMPORAL_PROFILE``, default ``default``), overridden by the ``TEMPORAL_*`` variables: ``TEMPORAL_ADDRESS``,
  ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``, ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``,
  ``TEMPORAL_TLS_SERVER_NAME``, ``TEMPORAL_TLS_CLIENT_CERT_PATH`` / ``_KEY_PATH``, ``TEMPORAL_GRPC_META_<KEY>``.
  With no address anywhere the address is ``DEFAULT_ADDRESS``, with no namespace ``default``.
* An explicit address (a command-line flag, the demo's own dev server) replaces the profile's address and
  keeps the rest of the profile (namespace, TLS, API key).
* Settings that cannot be used (a profile or file that does not parse, a missing profile, a certificate file
  that cannot be read) are a ``ConnectionSettingsError`` naming what is wrong; nothing is dialled.
* ``connect`` retries a server that cannot be reached (down, refusing the TLS handshake, ...) until
  ``server_wait_s`` has passed, then raises ``TemporalUnreachable``: one line naming the address and the last
  cause.
"""

from __future__ import annotations

import os
from asyncio import sleep
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import Any

from temporalio.client import Client
from temporalio.envconfig import ClientConfigProfile, ClientConnectConfig

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
RETRY_INTERVAL_S = 2.0


class ConnectionSettingsError(ValueError):
    """The Temporal connection settings cannot be used; the message names the variable, file or profile."""


class TemporalUnreachable(ConnectionError):
    """No Temporal server answered at ``address`` within the wait; ``cause`` is the last failure, one line."""

    def __init__(self, address: str, waited_s: float, cause: str):
        super().__init__(f"cannot reach Temporal at {address} (waited {waited_s:.0f} s): {cause}")
        self.address, self.cause = address, cause


@dataclass(frozen=True)
class TemporalTarget:
    """Where and how to connect: ``Client.connect``'s keyword arguments (``config``) and what they describe."""

    config: ClientConnectConfig

    @property
    def address(self) -> str:
        return self.config.get("target_host") or DEFAULT_ADDRESS

    @property
    def namespace(self) -> str:
        return self.config.get("namespace") or DEFAULT_NAMESPACE

    @property
    def secured(self) -> str:
        """How the connection is secured, for log lines: ``mTLS``, ``TLS``, ``API key``, ``plain``."""
        tls = self.config.get("tls")
        parts = []
        if tls:
            parts.append("mTLS" if getattr(tls, "client_cert", None) else "TLS")
        if self.config.get("api_key"):
            parts.append("API key")
        return " + ".join(parts) or "plain"


def target_from_env(env: Mapping[str, str] | None = None, address: str | None = None) -> TemporalTarget:
    """The connection the profile and the ``TEMPORAL_*`` variables of ``env`` (default: this process's) describe,
    at ``address`` when one is given (module invariants)."""
    variables = dict(os.environ if env is None else env)
    named_file = variables.get("TEMPORAL_CONFIG_FILE")
    if named_file and not Path(named_file).is_file():
        raise ConnectionSettingsError(f"TEMPORAL_CONFIG_FILE: no such file {named_file!r}")
    try:
        profile = ClientConfigProfile.load(override_env_vars=variables)
        config = profile.to_client_connect_config()
    except OSError as error:
        raise ConnectionSettingsError(
            f"Temporal TLS settings: cannot read {error.filename}: {error.strerror}"
        ) from None
    except (RuntimeError, ValueError) as error:
        source = variables.get("TEMPORAL_CONFIG_FILE") or "the Temporal config file"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConnectionSettingsError(
            f"{source} (profile {variables.get('TEMPORAL_PROFILE') or 'default'}): {first}"
        ) from None
    config["target_host"] = address or config.get("target_host") or DEFAULT_ADDRESS
    config.setdefault("namespace", DEFAULT_NAMESPACE)
    return TemporalTarget(config)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


async def connect(target: TemporalTarget, server_wait_s: float = 0.0, **options: Any) -> Client:
    """``Client.connect`` to ``target`` with ``options`` (data converter, runtime, identity, ...), retried every
    ``RETRY_INTERVAL_S`` while the server cannot be reached, for ``server_wait_s`` at most (module invariants)."""
    began = monotonic()
    while True:
        try:
            return await Client.connect(**{**target.config, **options})
        except ValueError as error:
            raise ConnectionSettingsError(f"Temporal address {target.address!r}: {_one_line(error)}") from None
        except (RuntimeError, OSError) as error:
            waited = monotonic() - began
            if waited >= server_wait_s:
                raise TemporalUnreachable(target.address, waited, _one_line(error)) from None
            await sleep(min(RETRY_INTERVAL_S, server_wait_s - waited))
