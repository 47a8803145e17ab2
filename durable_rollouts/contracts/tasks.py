"""A dataset row as the rollout reads it: the task, its grader's own specification and its test files.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from durable_rollouts.contracts.probes import ImpossibleProbe

GraderKind = Literal["swepro", "eval_cmd", "swebench", "harbor"]


def check_workdir_relative(values: list[str]) -> list[str]:
    """Paths and glob patterns a grader resolves in the workdir: relative, no ``..``, no pathspec magic."""
    for value in values:
        if not value or "\0" in value or "\n" in value:
            raise ValueError(f"{value!r}: must be a non-empty single-line path")
        if value.startswith(("/", ":")):
            raise ValueError(f"{value!r}: must be relative to the workdir (no leading '/' or ':')")
        if ".." in value.split("/"):
            raise ValueError(f"{value!r}: '..' is not allowed")
    return values


class SweProSpec(BaseModel):
    """SWE-bench Pro style grading: a run script, a parser that writes result JSON, and the test sets.

    Scripts travel inline (``run_script`` / ``parser_script``). A row's
    ``run_script_path`` / ``parser_script_path`` are resolved and inlined by the
    dataset reader inside the operator's dataset root; a task that still carries
    one is refused by the grader, which never reads a host path a row names.
    ``selected_test_files`` are workdir-relative; ``fail_to_pass`` and
    ``pass_to_pass`` may arrive as JSON-encoded strings.
    """

    model_config = ConfigDict(extra="ignore")

    run_script: str | None = None
    parser_script: str | None = None
    run_script_path: str | None = None
    parser_script_path: str | None = None
    before_repo_set_cmd: str | None = None
    selected_test_files: list[str] = []
    fail_to_pass: list[str] = []
    pass_to_pass: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _json_lists(cls, data):
        if isinstance(data, dict):
            for key in ("fail_to_pass", "pass_to_pass", "selected_test_files"):
                if isinstance(data.get(key), str):
                    data = {**data, key: json.loads(data[key])}
        return data

    @field_validator("selected_test_files")
    @classmethod
    def _relative_test_files(cls, values: list[str]) -> list[str]:
        return check_workdir_relative(values)


class SweBenchSpec(BaseModel):
    """A SWE-bench (Verified) instance, graded with the installed ``swebench`` package.

    ``repo`` + ``version`` select the package's test spec (``swebench`` < 5); an
    ``install_config`` (SWE-rebench / SWE-Gym convention) supplies that spec
    for a repo the package does not know. ``eval_script`` / ``log_parser`` /
    ``eval_type`` are the columns ``swebench`` >= 5 builds its spec from.
    Rows carry the test lists as JSON strings; ``dataset_rows`` decodes them.
    """

    model_config = ConfigDict(extra="ignore")

    repo: str = Field(min_length=1)
    version: str = Field(min_length=1)
    base_commit: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = []
    environment_setup_commit: str | None = None
    install_config: dict[str, Any] | None = None
    eval_script: str | None = None
    log_parser: str | None = None
    eval_type: str | None = None


class HarborTestFile(BaseModel):
    """One file of a Harbor task's ``tests/`` directory, inlined: ``path`` relative to it, the bytes base64-encoded."""

    path: str = Field(min_length=1)
    data_b64: str
    mode: int = Field(0o644, ge=0, le=0o7777)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return check_workdir_relative([value])[0]


class HarborSpec(BaseModel):
    """A Harbor task's verifier (``durable_rollouts.task_sources.harbor_tasks`` reads it from the task directory).

    ``tests`` is the whole ``tests/`` directory, ``test.sh`` among it, which the grader writes to ``/tests``
    and runs there (``durable_rollouts.grading.harbor_verifier``); ``verifier_timeout_s`` / ``agent_timeout_s`` are
    task.toml's ``[verifier]`` / ``[agent]`` ``timeout_sec`` (None: the task sets no agent timeout), which
    ``durable_rollouts.config.settings.RolloutBudgets.for_task`` folds into the rollout's budgets; ``verifier_env`` is
    ``[verifier] env``. ``source`` names the task directory the spec was read from.
    """

    source: str = ""
    tests: list[HarborTestFile] = Field(min_length=1)
    verifier_timeout_s: float = Field(600.0, gt=0)
    agent_timeout_s: float | None = Field(None, gt=0)
    verifier_env: dict[str, str] = {}


class TaskResources(BaseModel):
    """What a task asks of its sandbox (a Harbor task's ``[environment] cpus / memory_mb / storage_mb``);
    None: no request. ``durable_rollouts.docker_sandbox.limits.task_limits`` states how it meets the worker's caps."""

    cpus: float | None = Field(None, gt=0)
    memory_bytes: int | None = Field(None, gt=0)
    disk_bytes: int | None = Field(None, gt=0)


# Test trees and test modules by naming convention. ``test/`` and ``testing/`` count only at the top:
# deeper down they are often library code (``django/test/``, ``numpy/testing/``, ``sympy/testing/``).
DEFAULT_TEST_FILES = (
    "**/tests/**",
    "test/**",
    "testing/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/*_test.go",
    "**/*.test.*",
    "**/*.spec.*",
)


# Where an f2p row's script (``remote_env_info.f2p_script``, run with ``python3``) is written and run.
F2P_SCRIPT_PATH = "/tmp/rollout_f2p.py"


_F2P_COMMAND = re.compile(
    rf"echo ([A-Za-z0-9+/=]*) \| base64 -d > {re.escape(F2P_SCRIPT_PATH)} && python3 {re.escape(F2P_SCRIPT_PATH)}"
)


def f2p_eval_cmd(script: str) -> str:
    """The ``eval_cmd`` of an f2p row: its script written to ``F2P_SCRIPT_PATH`` and run."""
    encoded = base64.b64encode(script.encode()).decode()
    return f"echo {encoded} | base64 -d > {F2P_SCRIPT_PATH} && python3 {F2P_SCRIPT_PATH}"


def f2p_script(eval_cmd: str) -> str | None:
    """The script of an f2p row's ``eval_cmd`` (``f2p_eval_cmd``'s inverse), None for any other command."""
    match = _F2P_COMMAND.fullmatch(eval_cmd.strip())
    return base64.b64decode(match.group(1)).decode("utf-8", errors="replace") if match else None


class TaskSpec(BaseModel):
    """A dataset row normalised the way the reference's ``_metadata()`` does it.

    ``test_files``: glob patterns (workdir-relative, git ``:(glob)`` syntax) of
    the files the grader restores to the image's baseline after applying the
    agent's diff; ``None`` means ``DEFAULT_TEST_FILES``.
    ``harbor``: a Harbor task's verifier (its grader is then ``harbor``);
    ``resources``: what the task asks of its sandbox (None: the worker's caps).
    ``probe``: set on an impossible-task probe (``durable_rollouts.task_sources.impossible_probes``): its tests
    contradict its problem statement, so any pass is cheating; its samples are never trained on.
    """

    instance_id: str
    image: str
    workdir: str
    problem_statement: str
    swepro: SweProSpec | None = None
    eval_cmd: str | None = None
    swebench: SweBenchSpec | None = None
    pre_commands: list[str] = []
    reference_patch: str | None = None
    test_files: list[str] | None = Field(None, min_length=1)
    harbor: HarborSpec | None = None
    resources: TaskResources | None = None
    probe: ImpossibleProbe | None = None

    @field_validator("test_files")
    @classmethod
    def _relative_patterns(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else check_workdir_relative(values)

    @property
    def grader(self) -> GraderKind | None:
        if self.harbor is not None:
            return "harbor"
        if self.swepro is not None and (self.swepro.run_script or self.swepro.run_script_path):
            return "swepro"
        if self.eval_cmd:
            return "eval_cmd"
        if self.swebench is not None:
            return "swebench"
        return None
