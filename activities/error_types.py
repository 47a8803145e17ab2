"""Every ``ApplicationError`` type an activity fails with, named once.

Libraries raise their own exceptions; the activity faces (the
``@activity.defn`` functions) translate them into ``ApplicationError`` with a
type from here, and the workflows classify failures by these names
(``workflows.activity_errors``). The values are recorded in workflow
histories, so they never change. Standard library only: workflow code imports
it.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorType(StrEnum):
    # the Docker sandbox
    SANDBOX_IMAGE_MISSING = "SandboxImageMissing"
    # the task image's registry: it refused this host's credentials / could not be reached or timed out
    REGISTRY_AUTH_FAILED = "RegistryAuthFailed"
    REGISTRY_UNAVAILABLE = "RegistryUnavailable"
    SANDBOX_BOOT_ERROR = "SandboxBootError"
    SANDBOX_GONE = "SandboxGone"
    SANDBOX_ERROR = "SandboxError"
    GIT_DIFF_FAILED = "GitDiffFailed"
    # grading
    NO_GRADER = "NoGrader"
    NOT_EVALUABLE = "NotEvaluable"
    GRADER_SCRIPT_MISSING = "GraderScriptMissing"
    GRADING_FAILED = "GradingFailed"
    # the rollout host: agent slots, adapter sessions, the policy
    HOST_FULL = "HostFull"
    # the rollout's image is not on this host: left for a host that holds it (``pick_host``'s first attempts)
    IMAGE_ELSEWHERE = "ImageElsewhere"
    # this host already pulls as many images ahead as it takes at once (``prefetch_image``; another host may take it)
    PULLS_BUSY = "PullsBusy"
    WORKER_SHUTDOWN = "WorkerShutdown"
    SESSION_LOST = "SessionLost"
    NO_POLICY_SERVER = "NoPolicyServer"
    # a PolicySpec naming a tool-call or reasoning parser ``durable_rollouts.policy.parsers`` does not know
    UNKNOWN_PARSER = "UnknownParser"
    # ``durable_rollouts.policy.sglang_client.PolicyServerError`` left unhandled: Temporal names the failure after the
    # class
    POLICY_SERVER_ERROR = "PolicyServerError"
    # drift -> repair episodes
    UNKNOWN_TASK = "UnknownTask"
    NO_DRIFT = "NoDrift"
