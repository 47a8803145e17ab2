"""Host firewall for the sandbox network: sandboxes may reach the adapter ports and nothing else.

The ``rollouts-sandbox`` network is ``internal`` (no route off the machine),
but the host itself still answers on that bridge. A dedicated iptables chain
fixes that: traffic arriving from the bridge is accepted only for TCP ports a
worker registered (its adapter) and for replies to connections the host
opened; everything else is rejected. Rules are idempotent, each worker adds
its port at start-up and removes it on shutdown. Needs root and iptables;
without them the worker logs that the hardening is off and carries on.
"""

from __future__ import annotations

import logging
import shutil
import subprocess

log = logging.getLogger(__name__)
CHAIN = "ROLLOUTS-SANDBOX"


class FirewallUnavailable(RuntimeError):
    pass


def _iptables(*args: str, check: bool = True) -> bool:
    binary = shutil.which("iptables")
    if binary is None:
        raise FirewallUnavailable("iptables not installed")
    done = subprocess.run([binary, "-w", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise FirewallUnavailable(f"iptables {' '.join(args)}: {done.stderr.strip()}")
    return done.returncode == 0


def ensure_chain(bridge: str) -> None:
    """Create the chain (accept replies, reject the rest) and route the bridge's input through it."""
    if not _iptables("-n", "-L", CHAIN, check=False):
        _iptables("-N", CHAIN)
        _iptables("-A", CHAIN, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
        _iptables("-A", CHAIN, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
        _iptables("-A", CHAIN, "-j", "REJECT")
    jump = ("INPUT", "-i", bridge, "-j", CHAIN)
    if not _iptables("-C", *jump, check=False):
        _iptables("-I", *jump)


def allow_port(port: int) -> None:
    rule = (CHAIN, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT")
    if not _iptables("-C", *rule, check=False):
        _iptables("-I", *rule)


def revoke_port(port: int) -> None:
    while _iptables("-D", CHAIN, "-p", "tcp", "--dport", str(port), "-j", "ACCEPT", check=False):
        pass


def protect(bridge: str, port: int) -> bool:
    """Apply the rules for one worker; False (logged) when the host cannot enforce them."""
    try:
        ensure_chain(bridge)
        allow_port(port)
        return True
    except FirewallUnavailable as error:
        log.warning("sandbox firewall is off: %s", error)
        return False
