"""Host firewall for the sandbox network: sandboxes may reach the adapter ports and nothing else.

The ``rollouts-sandbox`` network is ``internal`` (no route off the machine),
but the host itself still answers on that bridge. A dedicated iptables chain
fixes that: traffic arriving from the bridge is accepted only for TCP ports a
worker registered (its adapter) and for replies to connections the host
opened; everything else is rejected. Rules are idempotent, each worker adds
its port at start-up and removes it on shutdown. A worker that died without
shutting down (SIGKILL) leaves its rule behind: a worker restarted on the
same port reuses it, and every worker's start-up prunes the allow rules of
ports no process on this host listens on (a live worker adds its rule only
after its adapter listens, so live rules are never pruned). Needs root and
iptables; without them the worker logs that the hardening is off and carries on.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess

log = logging.getLogger(__name__)
CHAIN = "ROLLOUTS-SANDBOX"
TCP_LISTEN = "0A"
_ALLOW_RULE = re.compile(r"^-A " + CHAIN + r" .*--dport (\d+) -j ACCEPT$")


class FirewallUnavailable(RuntimeError):
    pass


def _run_iptables(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("iptables")
    if binary is None:
        raise FirewallUnavailable("iptables not installed")
    return subprocess.run([binary, "-w", *args], capture_output=True, text=True)


def _iptables(*args: str, check: bool = True) -> bool:
    done = _run_iptables(*args)
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


def allowed_ports() -> list[int]:
    """The ports the chain currently accepts."""
    listing = _run_iptables("-S", CHAIN)
    if listing.returncode != 0:
        return []
    return [int(m.group(1)) for line in listing.stdout.splitlines() if (m := _ALLOW_RULE.match(line.strip()))]


def listening_ports() -> set[int]:
    """TCP ports some socket in this network namespace listens on (from /proc/net/tcp and tcp6)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table, encoding="ascii").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == TCP_LISTEN:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def prune_stale() -> list[int]:
    """Revoke the allow rules of ports nothing listens on (workers that died without shutting down); returns them.

    The chain is per host and the listeners are read from this process's network namespace: every worker on a
    host must share the host's namespace (as ``worker.py`` does), or a live worker's rule would look stale."""
    live = listening_ports()
    stale = sorted({port for port in allowed_ports() if port not in live})
    for port in stale:
        revoke_port(port)
    return stale


def protect(bridge: str, port: int) -> bool:
    """Apply the rules for one worker; False (logged) when the host cannot enforce them."""
    try:
        ensure_chain(bridge)
        stale = prune_stale()
        if stale:
            log.info("sandbox firewall: removed the rules of dead workers' ports %s", ", ".join(map(str, stale)))
        allow_port(port)
        return True
    except FirewallUnavailable as error:
        log.warning("sandbox firewall is off: %s", error)
        return False
