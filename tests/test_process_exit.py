"""``leave`` ends the process with its code and line and runs no interpreter finalization (no atexit handler),
where Temporal's core threads could crash it; what was printed and logged before is flushed."""

from __future__ import annotations

import subprocess
import sys

from durable_rollouts.paths import PROJECT_ROOT

PROBE = """
import atexit, logging, sys
from durable_rollouts.process_exit import leave
logging.basicConfig(stream=sys.stderr, format="%(message)s")
atexit.register(lambda: print("finalized", flush=True))
print("result line")
logging.getLogger("probe").warning("logged before")
leave(3, "probe: cannot reach Temporal at 127.0.0.1:1")
"""


def test_leave_exits_with_its_code_and_line_and_skips_finalization():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "result line\n", "stdout flushed, no atexit handler run"
    assert done.stderr == "logged before\nprobe: cannot reach Temporal at 127.0.0.1:1\n"
