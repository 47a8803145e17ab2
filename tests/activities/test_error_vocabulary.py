"""One error vocabulary: libraries raise their own exceptions, only activity faces build ``ApplicationError``,
with type names from ``activities.error_types`` (the names recorded histories carry)."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from activities import activity_failures
from activities import drift_repair as drift_activities
from activities import evaluate as evaluate_face
from activities import sandbox as sandbox_faces
from activities.error_types import ErrorType
from durable_rollouts.contracts.aborts import AbortReason, is_documented_abort_reason
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.docker_sandbox import errors
from durable_rollouts.grading import graders, swebench
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.parsers import UnknownParser
from durable_rollouts.policy.session_config import NoPolicyServer, session_config_for
from workflows import activity_errors, coding_agent_rollout, drift_repair_episode, regrade_rollout

ACTIVITIES = PROJECT_ROOT / "activities"
SOURCE_DIRS = [
    path for path in PROJECT_ROOT.iterdir() if (path / "__init__.py").is_file() and path.name not in ("tests", "bench")
]


def test_only_the_translation_module_builds_application_errors():
    sources = sorted(p for folder in SOURCE_DIRS for p in folder.rglob("*.py")) + sorted(PROJECT_ROOT.glob("*.py"))
    builders = [str(p.relative_to(PROJECT_ROOT)) for p in sources if re.search(r"\bApplicationError\(", p.read_text())]
    # The payload converter refuses an oversized payload while encoding it, beneath every activity face.
    assert builders == ["activities/activity_failures.py", "durable_rollouts/trainer_client/payload_storage.py"]


@pytest.mark.parametrize(
    ("translation", "error", "kind", "retryable"),
    [
        (sandbox_faces.BOOT_FAILURES, errors.SandboxImageMissing("no image"), "SandboxImageMissing", False),
        (sandbox_faces.BOOT_FAILURES, swebench.NotEvaluable("no spec"), "NotEvaluable", False),
        (sandbox_faces.BOOT_FAILURES, errors.SandboxGone("gone"), "SandboxBootError", False),
        (sandbox_faces.BOOT_FAILURES, errors.SandboxError("pre-command failed"), "SandboxBootError", False),
        (sandbox_faces.DIFF_FAILURES, errors.SandboxGone("gone"), "SandboxGone", False),
        (sandbox_faces.DIFF_FAILURES, errors.SandboxError("git failed"), "GitDiffFailed", False),
        (evaluate_face.GRADING_FAILURES, graders.NoGrader("none"), "NoGrader", False),
        (evaluate_face.GRADING_FAILURES, graders.GraderScriptMissing("no parser"), "GraderScriptMissing", False),
        (evaluate_face.GRADING_FAILURES, graders.ScriptPathRefused("a path"), "NotEvaluable", False),
        (evaluate_face.GRADING_FAILURES, errors.SandboxGone("gone"), "SandboxGone", True),
        (evaluate_face.GRADING_FAILURES, errors.SandboxError("tests crashed"), "GradingFailed", False),
        (evaluate_face.BOOT_FAILURES, errors.SandboxError("pre-command failed"), "SandboxBootError", False),
        (drift_activities.SANDBOX_FAILURES, errors.SandboxImageMissing("no image"), "SandboxImageMissing", False),
        (drift_activities.SANDBOX_FAILURES, errors.SandboxGone("gone"), "SandboxGone", True),
        (drift_activities.SANDBOX_FAILURES, errors.SandboxError("runner failed"), "SandboxError", False),
        (activity_failures.SESSION_SETUP_FAILURES, NoPolicyServer("none"), "NoPolicyServer", False),
        (
            activity_failures.SESSION_SETUP_FAILURES,
            UnknownParser("policy.reasoning_parser: unknown"),
            "UnknownParser",
            False,
        ),
    ],
)
def test_faces_report_library_errors_under_their_recorded_type_names(translation, error, kind, retryable):
    reported = translation(error)
    assert (reported.type, reported.non_retryable, reported.message) == (kind, not retryable, str(error))


def test_the_policy_lookup_raises_its_own_exception():
    with pytest.raises(NoPolicyServer):
        session_config_for(PolicySpec(), None, False, "wf#1")
    with pytest.raises(UnknownParser):
        session_config_for(PolicySpec(tool_parser="nope"), "http://policy", False, "wf#1")


def test_the_workflows_classify_only_known_types_through_the_one_table():
    for classified in (coding_agent_rollout.CLASSIFIED_ERRORS, drift_repair_episode.CLASSIFIED_ERRORS):
        assert set(classified) <= set(activity_errors.ABORT_REASONS)
    assert all(isinstance(kind, ErrorType) for kind in activity_errors.ABORT_REASONS)


def test_every_fixed_abort_reason_is_in_the_docs():
    readme = (ACTIVITIES.parent / "docs" / "groups.md").read_text()
    assert [reason.value for reason in AbortReason if f"`{reason.value}`" not in readme] == []


def test_the_workflows_abort_only_with_fixed_reasons_or_the_prefixed_forms():
    for module in (coding_agent_rollout, drift_repair_episode, regrade_rollout):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Aborted":
                assert not isinstance(node.args[0], ast.Constant), ast.unparse(node)
            if isinstance(node, ast.keyword) and node.arg == "abort_reason":
                assert not isinstance(node.value, ast.Constant) or node.value.value is None, ast.unparse(node)


@pytest.mark.parametrize(
    ("reason", "documented"),
    [
        ("wall_clock_timeout", True),
        ("sandbox_failed", True),
        ("exception:SandboxGone", True),
        ("exception:Timeout:START_TO_CLOSE", True),
        ("invalid_row:metadata.image", True),
        ("exception:", False),
        ("sandbox_exploded", False),
    ],
)
def test_abort_reasons_are_fixed_or_prefixed(reason, documented):
    assert is_documented_abort_reason(reason) is documented
