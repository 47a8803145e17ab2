"""Worker and rollout settings, read from the environment with the reference's knob names.

Names and defaults follow slime's coding-agent example (``SWE_TIME_BUDGET_SEC``
1800, ``SWE_EVAL_TIMEOUT_SEC`` 600, ``SWE_GENERATE_GUARD_SEC`` = budget +
eval + pull (``ROLLOUT_PULL_TIMEOUT_S``) + 180 unless set, ``SHIM_BIND_HOST`` / ``SHIM_PORT`` for the adapter,
``SLIME_HEAD_HOST`` for the address sandboxes dial back to,
``SLIME_AGENT_CC_EXTRA_ARGS`` / ``_EXTRA_ENVS`` for Claude Code,
``SWE_HOST_CC_TARBALL`` / ``SWE_HOST_NODE_TARBALL`` for a Claude Code taken
from host tarballs instead of the npm install), plus the Temporal ones and the
per-sandbox limits (``ROLLOUT_SANDBOX_CPUS``, ``_MEMORY_BYTES``, ``_DISK_BYTES``), whether
grading sandboxes have no network (``ROLLOUT_GRADING_OFFLINE``, default 1) and sandboxes' package tools
run offline (``ROLLOUT_OFFLINE_TOOLS``, default 1; both ``durable_rollouts.docker_sandbox.limits.SandboxSettings``), how
long finishing an adapter session waits for its turns in flight before aborting them (``ROLLOUT_FINISH_GRACE_S``,
seconds, default 5; 0 aborts at once), the parsers of the policy's completions for rollouts whose ``PolicySpec`` names
none (``ROLLOUT_TOOL_CALL_PARSER``, default ``auto``; ``ROLLOUT_REASONING_PARSER``, default ``qwen3``; SGLang's names,
``durable_rollouts.policy.parsers.registry``) and the trainer's staleness bound (``ROLLOUT_MAX_STALENESS``,
``ROLLOUT_STALENESS_POLICY``), the share of a run's groups that are impossible-task probes
(``ROLLOUT_IMPOSSIBLE_SHARE``, default 0) and where the worker serves Prometheus metrics (``ROLLOUT_METRICS_ADDRESS``,
``host:port``; unset or empty: no endpoint). A bad value is a ``SettingsError`` naming the variable.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import socket
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast, get_args

from pydantic import BaseModel, Field, SecretStr, ValidationError

from durable_rollouts.contracts.sandboxes import DEFAULT_PULL_TIMEOUT_S
from durable_rollouts.contracts.session import (
    FINISH_GRACE_S,
    MAX_FINISH_GRACE_S,
    POLICY_ENGINES,
    PolicyEngine,
    StalenessBound,
    StalenessPolicy,
)
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.image_refs import parse_mirror_rules
from durable_rollouts.docker_sandbox.image_settings import ImageSettings, PullPolicy, RegistryCredentials
from durable_rollouts.docker_sandbox.limits import SANDBOX_DISK_BYTES, SANDBOX_MEMORY_BYTES, SandboxLimits
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.parsers import (
    DEFAULT_REASONING_PARSER,
    DEFAULT_TOOL_CALL_PARSER,
    UnknownParser,
    known_parser_name,
    reasoning_parser_named,
    tool_call_parser_named,
)
from durable_rollouts.policy.session_config import ParserDefaults
from durable_rollouts.policy.tokenizer_cache import DEFAULT_TOKENIZER_DIR

SHARED_TASK_QUEUE = "rl-rollouts"
_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
_BYTE_COUNT = re.compile(r"(\d+) *([kmgt]?)(?:i?b)?", re.IGNORECASE)


class SettingsError(ValueError):
    pass


# Concurrent agents per host core: agents mostly wait on the model, and one core keeps about four busy while
# the model takes 3-4 s a turn (``bench.host_capacity_bench``: the knee of turns per second is at 8 on
# 2 cores; memory, about 150 MB an agent, allows far more).
AGENT_SLOTS_PER_CPU = 4


def default_agent_slots(cpus: int | None = None) -> int:
    """``ROLLOUT_AGENT_SLOTS`` when unset: ``AGENT_SLOTS_PER_CPU`` per host CPU."""
    return AGENT_SLOTS_PER_CPU * (cpus or host_cpus())


class RolloutBudgets(BaseModel):
    agent_budget_s: int = Field(1800, ge=1)
    eval_timeout_s: int = Field(600, ge=1)
    # How long a host may take to pull a task image it lacks, apart from the boot.
    pull_timeout_s: int = Field(DEFAULT_PULL_TIMEOUT_S, ge=1)
    guard_s: int = Field(3180, ge=1)
    # How long a rollout whose host went silent waits for it to come back before it moves to another host.
    resume_window_s: int = Field(120, ge=1)

    def for_task(self, task: TaskSpec) -> RolloutBudgets:
        """The budgets ``task``'s rollouts get: a Harbor task's agent and verifier timeouts (``HarborSpec``),
        rounded up to whole seconds, lower the agent budget and the eval timeout; the run's budgets (its
        ``SWE_*`` settings) are the caps a task never raises (they also size the guard and the sandboxes'
        lifetime), so a task that needs more runs under raised run budgets."""
        if task.harbor is None:
            return self
        agent = self.agent_budget_s
        if task.harbor.agent_timeout_s is not None:
            agent = min(agent, math.ceil(task.harbor.agent_timeout_s))
        evaluation = min(self.eval_timeout_s, math.ceil(task.harbor.verifier_timeout_s))
        return self.model_copy(update={"agent_budget_s": agent, "eval_timeout_s": evaluation})


class WorkerSettings(BaseModel):
    """``temporal_address``: an explicit server address (``worker.py --temporal-address``) that replaces the
    connection settings' own; the rest of the connection (namespace, TLS, API key) always comes from
    ``durable_rollouts.trainer_client.temporal_connection`` (a ``temporal.toml`` profile and the ``TEMPORAL_*``
    variables)."""

    temporal_address: str | None = None
    task_queue: str = SHARED_TASK_QUEUE
    adapter_bind_host: str | None = None
    adapter_port: int = Field(18001, ge=0, le=65535)
    public_host: str | None = None
    policy_url: str | None = None
    policy_engine: PolicyEngine = "sglang"
    tool_call_parser: str = DEFAULT_TOOL_CALL_PARSER
    reasoning_parser: str = DEFAULT_REASONING_PARSER
    tokenizer_dir: Path = DEFAULT_TOKENIZER_DIR
    host_id: str = Field(default_factory=socket.gethostname)
    results_dir: Path = PROJECT_ROOT / "results"
    agent_slots: int = Field(default_factory=default_agent_slots, ge=1)
    reap_interval_s: float = Field(60.0, gt=0)
    finish_grace_s: float = Field(FINISH_GRACE_S, ge=0, le=MAX_FINISH_GRACE_S)
    cc_tarball: Path | None = None
    node_tarball: Path | None = None
    claude_extra_args: list[str] = []
    claude_extra_env: dict[str, str] = {}
    budgets: RolloutBudgets = RolloutBudgets()
    sandbox_cpus: float | None = Field(None, gt=0)
    sandbox_memory_bytes: int = Field(SANDBOX_MEMORY_BYTES, ge=64 << 20)
    sandbox_disk_bytes: int = Field(SANDBOX_DISK_BYTES, ge=0)
    grading_offline: bool = True
    offline_tools: bool = True
    metrics_address: str | None = None
    images: ImageSettings = ImageSettings()
    image_affinity: bool = True

    @property
    def host_queue(self) -> str:
        return f"rl-rollouts-host-{self.host_id}"

    @property
    def sandbox_cpu_limit(self) -> float:
        """``sandbox_cpus`` if set, else this host's share per agent slot (see ``default_sandbox_cpus``)."""
        return self.sandbox_cpus or default_sandbox_cpus(self.agent_slots)

    @property
    def sandbox_limits(self) -> SandboxLimits:
        return SandboxLimits(
            cpus=self.sandbox_cpu_limit, memory_bytes=self.sandbox_memory_bytes, disk_bytes=self.sandbox_disk_bytes
        )

    @property
    def parser_defaults(self) -> ParserDefaults:
        return ParserDefaults(tool_parser=self.tool_call_parser, reasoning_parser=self.reasoning_parser)


def host_cpus() -> int:
    return os.cpu_count() or 1


def default_sandbox_cpus(agent_slots: int, cpus: int | None = None) -> float:
    """The host's CPUs divided among its agent slots, at least one CPU (a cap per sandbox, not a reservation)."""
    return max(1.0, round((cpus or host_cpus()) / agent_slots, 2))


def _int(env: Mapping[str, str], name: str, default: int, least: int | None = None, most: int | None = None) -> int:
    """An integer from ``least`` to ``most`` (either bound optional)."""
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected an integer, got {raw!r}") from None
    if least is not None and value < least:
        raise SettingsError(f"{name}: must be at least {least}, got {value}")
    if most is not None and value > most:
        raise SettingsError(f"{name}: must be at most {most}, got {value}")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float, most: float = float("inf")) -> float:
    """A duration in seconds, 0 or more (at most ``most``)."""
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number of seconds, got {raw!r}") from None
    if not 0 <= value < float("inf"):
        raise SettingsError(f"{name}: must be 0 or more seconds, got {raw}")
    if value > most:
        raise SettingsError(f"{name}: at most {most:g} seconds, got {raw}")
    return value


def _parser_name(env: Mapping[str, str], name: str, lookup: Callable[[str], object], default: str) -> str:
    """A parser name ``lookup`` knows; an unknown one is an error listing the supported names."""
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        return known_parser_name(lookup, raw, name)
    except UnknownParser as error:
        raise SettingsError(str(error)) from None


def policy_engine_from_env(env: Mapping[str, str] = os.environ) -> PolicyEngine | None:
    """``ROLLOUT_POLICY_ENGINE``: the protocol the policy server speaks, ``sglang`` or ``vllm``; None when unset. The
    worker's default engine (unset: sglang), and in the trainer's process the engine its rollouts' specs name."""
    raw = env.get("ROLLOUT_POLICY_ENGINE", "").strip()
    if not raw:
        return None
    if raw not in POLICY_ENGINES:
        raise SettingsError(f"ROLLOUT_POLICY_ENGINE: {raw!r} is not one of {', '.join(POLICY_ENGINES)}")
    return raw


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """``1``/``true``/``yes`` or ``0``/``false``/``no`` (any case); unset or empty: ``default``."""
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in _FLAGS:
        raise SettingsError(f"{name}: expected 1 or 0 (true/false, yes/no), got {env[name]!r}")
    return _FLAGS[raw]


def _byte_count(env: Mapping[str, str], name: str, default: int) -> int:
    """An integer number of bytes, optionally with a binary unit: ``512M``, ``10G``, ``10GiB``."""
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    match = _BYTE_COUNT.fullmatch(raw)
    if match is None:
        raise SettingsError(f"{name}: expected a byte count such as 4294967296, 512M or 10G, got {raw!r}")
    return int(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]


def _sandbox_limits(env: Mapping[str, str]) -> dict:
    values: dict = {
        "sandbox_memory_bytes": _byte_count(env, "ROLLOUT_SANDBOX_MEMORY_BYTES", SANDBOX_MEMORY_BYTES),
        "sandbox_disk_bytes": _byte_count(env, "ROLLOUT_SANDBOX_DISK_BYTES", SANDBOX_DISK_BYTES),
    }
    if values["sandbox_memory_bytes"] < 64 << 20:
        raise SettingsError(f"ROLLOUT_SANDBOX_MEMORY_BYTES: at least 64M, got {values['sandbox_memory_bytes']}")
    raw = env.get("ROLLOUT_SANDBOX_CPUS", "")
    if raw:
        try:
            cpus = float(raw)
        except ValueError:
            raise SettingsError(f"ROLLOUT_SANDBOX_CPUS: expected a number of CPUs, got {raw!r}") from None
        if not 0.01 <= cpus <= host_cpus():
            raise SettingsError(
                f"ROLLOUT_SANDBOX_CPUS: must lie between 0.01 and this host's {host_cpus()} CPUs, got {raw}"
            )
        values["sandbox_cpus"] = cpus
    return values


def _metrics_address(env: Mapping[str, str]) -> str | None:
    """``host:port`` (an IPv6 host in brackets) with a port from 1 to 65535; unset or empty: None."""
    raw = env.get("ROLLOUT_METRICS_ADDRESS", "").strip()
    if raw == "":
        return None
    host, _, port = raw.rpartition(":")
    if (
        not host
        or not port.isdigit()
        or not 1 <= int(port) <= 65535
        or (":" in host and not (host.startswith("[") and host.endswith("]")))
    ):
        raise SettingsError(
            f"ROLLOUT_METRICS_ADDRESS: expected host:port such as 127.0.0.1:9464 or 0.0.0.0:9464, got {raw!r}"
        )
    return raw


def budgets_from_env(env: Mapping[str, str] = os.environ) -> RolloutBudgets:
    agent = _int(env, "SWE_TIME_BUDGET_SEC", 1800)
    evaluation = _int(env, "SWE_EVAL_TIMEOUT_SEC", 600)
    pull = _int(env, "ROLLOUT_PULL_TIMEOUT_S", 600)
    guard = _int(env, "SWE_GENERATE_GUARD_SEC", 0) or agent + evaluation + pull + 180
    resume = _int(env, "ROLLOUT_RESUME_WINDOW_S", 120)
    named = (
        ("SWE_TIME_BUDGET_SEC", agent),
        ("SWE_EVAL_TIMEOUT_SEC", evaluation),
        ("ROLLOUT_PULL_TIMEOUT_S", pull),
        ("SWE_GENERATE_GUARD_SEC", guard),
        ("ROLLOUT_RESUME_WINDOW_S", resume),
    )
    for name, value in named:
        if value <= 0:
            raise SettingsError(f"{name}: must be positive, got {value}")
    return RolloutBudgets(
        agent_budget_s=agent, eval_timeout_s=evaluation, pull_timeout_s=pull, guard_s=guard, resume_window_s=resume
    )


def staleness_from_env(env: Mapping[str, str] = os.environ) -> StalenessBound | None:
    """``ROLLOUT_MAX_STALENESS`` (versions; unset: no bound) and ``ROLLOUT_STALENESS_POLICY`` (``mask``, the default, or
    ``drop``)."""
    if env.get("ROLLOUT_MAX_STALENESS", "").strip() == "":
        return None
    bound = _int(env, "ROLLOUT_MAX_STALENESS", 0, least=0)
    policy = env.get("ROLLOUT_STALENESS_POLICY", "mask") or "mask"
    if policy not in get_args(StalenessPolicy):
        raise SettingsError(f"ROLLOUT_STALENESS_POLICY: one of {', '.join(get_args(StalenessPolicy))}, got {policy!r}")
    return StalenessBound(max_staleness=bound, policy=policy)


def impossible_share_from_env(env: Mapping[str, str] = os.environ) -> float:
    """``ROLLOUT_IMPOSSIBLE_SHARE``: the share of a run's groups that are impossible-task probes
    (``durable_rollouts.task_sources.impossible_probes``), 0 to 1; unset: 0, none."""
    raw = env.get("ROLLOUT_IMPOSSIBLE_SHARE", "").strip()
    if not raw:
        return 0.0
    try:
        share = float(raw)
    except ValueError:
        raise SettingsError(f"ROLLOUT_IMPOSSIBLE_SHARE: expected a share between 0 and 1, got {raw!r}") from None
    if not 0 <= share <= 1:
        raise SettingsError(f"ROLLOUT_IMPOSSIBLE_SHARE: must lie between 0 and 1, got {raw}")
    return share


def prefetch_from_env(env: Mapping[str, str] = os.environ) -> bool:
    """``ROLLOUT_PREFETCH_IMAGES``: whether the trainer side tells the fleet which images its next groups need."""
    return _flag(env, "ROLLOUT_PREFETCH_IMAGES", True)


def images_from_env(env: Mapping[str, str] = os.environ) -> ImageSettings:
    """``ROLLOUT_PULL_POLICY`` (``missing``, ``always``, ``never``), ``ROLLOUT_IMAGE_MIRRORS``
    (``SOURCE=TARGET,...``) and one registry's credentials (``ROLLOUT_REGISTRY``, ``ROLLOUT_REGISTRY_USERNAME``,
    ``ROLLOUT_REGISTRY_PASSWORD``; without them, Docker's ``config.json``) and the task images' disk budget
    (``ROLLOUT_IMAGE_CACHE_BYTES``, 0: none)."""
    policy = env.get("ROLLOUT_PULL_POLICY", "").strip() or "missing"
    if policy not in get_args(PullPolicy):
        raise SettingsError(f"ROLLOUT_PULL_POLICY: one of {', '.join(get_args(PullPolicy))}, got {policy!r}")
    try:
        mirrors = parse_mirror_rules(env.get("ROLLOUT_IMAGE_MIRRORS", ""))
    except ValueError as error:
        raise SettingsError(f"ROLLOUT_IMAGE_MIRRORS: {error}") from None
    names = ("ROLLOUT_REGISTRY", "ROLLOUT_REGISTRY_USERNAME", "ROLLOUT_REGISTRY_PASSWORD")
    credentials = None
    if any(env.get(name, "").strip() for name in names):
        for name in names:
            if not env.get(name, "").strip():
                raise SettingsError(
                    f"{name}: not set; a registry's credentials are ROLLOUT_REGISTRY, ROLLOUT_REGISTRY_USERNAME and "
                    f"ROLLOUT_REGISTRY_PASSWORD together"
                )
        try:
            credentials = RegistryCredentials(
                registry=env["ROLLOUT_REGISTRY"],
                username=env["ROLLOUT_REGISTRY_USERNAME"].strip(),
                password=SecretStr(env["ROLLOUT_REGISTRY_PASSWORD"]),
            )
        except ValidationError as error:
            raise SettingsError(f"ROLLOUT_REGISTRY: {error.errors()[0]['msg']}") from None
    cache_bytes = _byte_count(env, "ROLLOUT_IMAGE_CACHE_BYTES", 0)
    return ImageSettings(
        pull_policy=cast(PullPolicy, policy), mirrors=mirrors, credentials=credentials, cache_bytes=cache_bytes
    )


def settings_from_env(env: Mapping[str, str] = os.environ) -> WorkerSettings:
    extra_env_raw = env.get("SLIME_AGENT_CC_EXTRA_ENVS", "")
    try:
        extra_env = json.loads(extra_env_raw) if extra_env_raw else {}
    except json.JSONDecodeError as exc:
        raise SettingsError(f"SLIME_AGENT_CC_EXTRA_ENVS: not a JSON object ({exc.msg})") from None
    if not isinstance(extra_env, dict):
        raise SettingsError("SLIME_AGENT_CC_EXTRA_ENVS: must be a JSON object of strings")
    values = {
        "task_queue": env.get("ROLLOUT_TASK_QUEUE") or SHARED_TASK_QUEUE,
        "adapter_bind_host": env.get("SHIM_BIND_HOST") or None,
        "adapter_port": _int(env, "SHIM_PORT", 18001, least=0, most=65535),
        "public_host": env.get("SLIME_HEAD_HOST") or None,
        "policy_url": env.get("ROLLOUT_POLICY_URL") or None,
        "policy_engine": policy_engine_from_env(env) or "sglang",
        "tool_call_parser": _parser_name(
            env, "ROLLOUT_TOOL_CALL_PARSER", tool_call_parser_named, DEFAULT_TOOL_CALL_PARSER
        ),
        "reasoning_parser": _parser_name(
            env, "ROLLOUT_REASONING_PARSER", reasoning_parser_named, DEFAULT_REASONING_PARSER
        ),
        "agent_slots": _int(env, "ROLLOUT_AGENT_SLOTS", default_agent_slots(), least=1),
        "reap_interval_s": _int(env, "ROLLOUT_REAP_INTERVAL_S", 60, least=1),
        "finish_grace_s": _seconds(env, "ROLLOUT_FINISH_GRACE_S", FINISH_GRACE_S, MAX_FINISH_GRACE_S),
        "claude_extra_args": shlex.split(env.get("SLIME_AGENT_CC_EXTRA_ARGS", "")),
        "claude_extra_env": {str(k): str(v) for k, v in extra_env.items()},
        "budgets": budgets_from_env(env),
        "grading_offline": _flag(env, "ROLLOUT_GRADING_OFFLINE", True),
        "offline_tools": _flag(env, "ROLLOUT_OFFLINE_TOOLS", True),
        "metrics_address": _metrics_address(env),
        "images": images_from_env(env),
        "image_affinity": _flag(env, "ROLLOUT_IMAGE_AFFINITY", True),
        **_sandbox_limits(env),
    }
    for key, name in (
        ("tokenizer_dir", "ROLLOUT_TOKENIZER_DIR"),
        ("results_dir", "ROLLOUT_RESULTS_DIR"),
        ("host_id", "ROLLOUT_HOST_ID"),
    ):
        if env.get(name):
            values[key] = env[name]
    for key, name in (("cc_tarball", "SWE_HOST_CC_TARBALL"), ("node_tarball", "SWE_HOST_NODE_TARBALL")):
        if env.get(name):
            if not Path(env[name]).is_file():
                raise SettingsError(f"{name}: no such file {env[name]!r}")
            values[key] = Path(env[name])
    if values.get("node_tarball") and not values.get("cc_tarball"):
        raise SettingsError(
            "SWE_HOST_NODE_TARBALL: set without SWE_HOST_CC_TARBALL (the Node tarball only runs a JavaScript CLI)"
        )
    return WorkerSettings(**values)
