"""Probe a trivial HTTP GET at a fixed period and print each latency: an outside measure of a server's loop lag.

Run as its own process (stdlib only) so the prober's own scheduling is not slowed by the GIL of the process
that reads its output. Every ``--interval`` seconds it sends ``GET <path>`` over one keep-alive connection
(reconnecting after an error) and prints one line per probe to stdout::

    <wall time the probe was sent> <seconds until the whole answer was read>    (a 2xx answer)
    <wall time the probe was sent> ERR <reason>                                 (anything else)

Invariants: probes never overlap (a probe that takes longer than the period delays the next one, which is
then sent at once, so a stall shows up as one long sample, not as many); the output is line-buffered, so a
reader sees each probe as soon as it ends. Stops on SIGTERM or SIGINT.

    python -m bench.loop_probe http://172.30.0.1:18001/healthz [--interval 0.05] [--timeout 10]
"""

from __future__ import annotations

import argparse
import http.client
import signal
import sys
import time
import urllib.parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="http://host:port/path of a GET the server answers without doing work")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between probe starts")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds before a probe counts as an error")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    url = urllib.parse.urlsplit(args.url)
    path = url.path or "/"
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    conn: http.client.HTTPConnection | None = None
    next_at = time.monotonic()
    while not stopping:
        sent_wall, sent = time.time(), time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(url.hostname, url.port, timeout=args.timeout)
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - sent
            line = (
                f"{sent_wall:.6f} {elapsed:.6f}"
                if 200 <= response.status < 300
                else f"{sent_wall:.6f} ERR status {response.status}"
            )
        except (OSError, http.client.HTTPException) as error:
            line = f"{sent_wall:.6f} ERR {type(error).__name__}"
            if conn is not None:
                conn.close()
            conn = None
        print(line, flush=True)
        next_at = max(next_at + args.interval, time.monotonic())
        time.sleep(max(0.0, next_at - time.monotonic()))
    if conn is not None:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
