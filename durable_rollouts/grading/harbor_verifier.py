"""Grade a Harbor task: its ``tests/test.sh`` run in the fresh grading sandbox, its reward read from ``/logs/verifier``.

Runs after ``graders.evaluate`` applied the agent's diff and reset the task's tests in the workdir. ``/tests`` and
``/logs/verifier`` are emptied, the task's inlined ``tests/`` directory is written to ``/tests`` (root-owned, each
file with its own mode), and ``bash /tests/test.sh`` runs as root in the workdir with ``[verifier] env``, detached
and bounded like every grader (``graders._run_grader``). docs/task_sources.md (*Harbor task directories*) gives
the rest, and the one difference from Harbor: the verifier runs in a fresh container given the agent's diff.

Invariants: the reward file is the verdict, read as Harbor reads it (``reward.json``, then ``reward.txt``), never
``test.sh``'s exit code; a missing, empty or garbled file, a non-finite number or a verifier killed at its bound
is reward 0 with a note naming the file or the bound. ``solved`` iff the reward is at least 1 (``SOLVED_AT``); a
fractional reward is kept as written, so for this grader alone ``reward`` is not 1.0-iff-solved.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Awaitable, Callable

from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.contracts.tasks import HarborSpec
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.files import SandboxFile
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading.grading_log import applied_cleanly, log_tail, read_log

TESTS_DIR = "/tests"
VERIFIER_DIR = "/logs/verifier"
REWARD_TXT = f"{VERIFIER_DIR}/reward.txt"
REWARD_JSON = f"{VERIFIER_DIR}/reward.json"
TEST_STDOUT = f"{VERIFIER_DIR}/test-stdout.txt"
SOLVED_AT = 1.0
REWARD_FILE_BYTES = 1 << 20
MAX_METRICS = 32
MAX_METRIC_KEY = 64
SETUP_TIMEOUT_S = 60.0
COMMAND = f"exec >{TEST_STDOUT} 2>&1\nbash {TESTS_DIR}/test.sh"
_SETUP = f"rm -rf {TESTS_DIR} {VERIFIER_DIR} && mkdir -p {TESTS_DIR} {VERIFIER_DIR} /logs/agent"

# Runs a command detached as root with an environment: its exit code and "", or None and why it was killed.
RunGrader = Callable[[str, dict[str, str]], Awaitable[tuple[int | None, str]]]


def _number(value: object) -> float | None:
    """A finite JSON number (not a boolean) as a float, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _text_reward(text: str) -> tuple[float | None, str]:
    """reward.txt's number, or None and what is wrong with it."""
    if not text.strip():
        return None, f"{REWARD_TXT} is empty"
    try:
        value = float(text.strip())
    except ValueError:
        return None, f"{REWARD_TXT} is not a number: {text.strip()[:80]!r}"
    return (
        (value, "") if math.isfinite(value) else (None, f"{REWARD_TXT} is not a finite number: {text.strip()[:80]!r}")
    )


def read_reward(json_text: str | None, txt_text: str | None) -> tuple[float, dict[str, float], str]:
    """(reward, metrics, problem) from the reward files' texts (None: the file does not exist); problem is ""
    when the reward was read, else the reward is 0 and problem names the file."""
    if json_text is not None:
        try:
            parsed = json.loads(json_text)
        except ValueError as error:
            return 0.0, {}, f"{REWARD_JSON} is not valid JSON ({error})"
        if not isinstance(parsed, dict):
            return 0.0, {}, f"{REWARD_JSON} is not a JSON object"
        metrics = {str(key): number for key, value in parsed.items() if (number := _number(value)) is not None}
        if "reward" in metrics:
            return metrics["reward"], metrics, ""
        if txt_text is not None:
            value, problem = _text_reward(txt_text)
            if value is not None:
                return value, {**metrics, "reward": value}, ""
            return 0.0, metrics, f"{REWARD_JSON} has no numeric 'reward' and {problem}"
        return 0.0, metrics, f"{REWARD_JSON} has no numeric 'reward' (and there is no {REWARD_TXT})"
    if txt_text is not None:
        value, problem = _text_reward(txt_text)
        return (value, {"reward": value}, "") if value is not None else (0.0, {}, problem)
    return 0.0, {}, f"no reward file: the verifier wrote neither {REWARD_TXT} nor {REWARD_JSON}"


async def _read(sandboxes: DockerSandboxes, handle: SandboxHandle, path: str, limit: int) -> str | None:
    try:
        return (await sandboxes.read_file(handle, path, limit)).decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None


def bounded_metrics(metrics: dict[str, float]) -> tuple[dict[str, float], int]:
    """The metrics a result carries (they travel in every group result): ``reward`` and the first others, at most
    ``MAX_METRICS`` in all, each key at most ``MAX_METRIC_KEY`` characters; and how many were left out."""
    kept = {"reward": metrics["reward"]} if "reward" in metrics else {}
    for key, value in metrics.items():
        if len(kept) < MAX_METRICS and len(key) <= MAX_METRIC_KEY:
            kept.setdefault(key, value)
    return kept, len(metrics) - len(kept)


async def grade(
    sandboxes: DockerSandboxes, handle: SandboxHandle, spec: HarborSpec, method: str, run: RunGrader
) -> tuple[EvalResult, str]:
    """Run the task's verifier with ``run`` (``method``: how the diff applied); the result and the whole output, note
    included."""
    setup = await sandboxes.exec(handle, _SETUP, user="root", timeout_s=SETUP_TIMEOUT_S)
    if setup.exit_code != 0:
        raise SandboxError(
            f"could not prepare {TESTS_DIR} and {VERIFIER_DIR} in {handle.name}: {setup.output.strip()[-2000:]}"
        )
    files = [
        SandboxFile(f"{TESTS_DIR}/{test.path}", base64.b64decode(test.data_b64), mode=test.mode) for test in spec.tests
    ]
    await sandboxes.write_files(handle, files)
    code, killed = await run(COMMAND, dict(spec.verifier_env))
    output = await read_log(sandboxes, handle, TEST_STDOUT)
    metrics: dict[str, float]
    if code is None:
        reward, metrics, note = 0.0, {}, killed
    else:
        json_text = await _read(sandboxes, handle, REWARD_JSON, REWARD_FILE_BYTES)
        txt_text = await _read(sandboxes, handle, REWARD_TXT, REWARD_FILE_BYTES)
        reward, metrics, problem = read_reward(json_text, txt_text)
        metrics, dropped = bounded_metrics(metrics)
        note = f"\n[{problem}: reward 0]" if problem else f"\n[harbor reward {reward:g}; test.sh exit {code}]"
        if dropped:
            note += (
                f"\n[{dropped} metrics of {REWARD_JSON} not kept: at most {MAX_METRICS}, keys at most "
                f"{MAX_METRIC_KEY} characters]"
            )
    result = EvalResult(
        reward=reward,
        solved=reward >= SOLVED_AT,
        applied_cleanly=applied_cleanly(method),
        grader="harbor",
        apply_method=method,
        log_tail=log_tail(output, note),
        rewards=metrics,
    )
    return result, f"[grader harbor: bash {TESTS_DIR}/test.sh]\n{output}{note}"
