"""The one translation of library exceptions into the ``ApplicationError`` an activity fails with.

Libraries raise their own exceptions; an activity face declares, as a
``Translation``, which of them it reports under which ``ErrorType`` and
whether Temporal may retry it, and raises ``translation(error)``. Nothing
else in ``activities/`` constructs an ``ApplicationError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.exceptions import ApplicationError

from activities.error_types import ErrorType
from durable_rollouts.policy.parsers import UnknownParser
from durable_rollouts.policy.session_config import NoPolicyServer


def application_error(error: BaseException, kind: ErrorType, *, retryable: bool = False) -> ApplicationError:
    """``error``'s message as an activity failure of type ``kind`` (non-retryable unless ``retryable``)."""
    return ApplicationError(str(error), type=kind, non_retryable=not retryable)


def final_failure(error: BaseException, note: str) -> ApplicationError:
    """``error`` as the last failure of an activity that spent its own budget of failures: under the error's own type
    name (as Temporal names an untranslated one), ``note`` after its message, never retried."""
    return ApplicationError(f"{type(error).__name__}: {error} ({note})", type=type(error).__name__, non_retryable=True)


@dataclass(frozen=True)
class Failure:
    exception: type[BaseException]
    kind: ErrorType
    retryable: bool = False


class Translation:
    """Ordered rules; the first whose exception class matches names the failure (list subclasses first)."""

    def __init__(self, *rules: Failure):
        self.rules = rules
        self.handled: tuple[type[BaseException], ...] = tuple(rule.exception for rule in rules)

    def __call__(self, error: BaseException) -> ApplicationError:
        for rule in self.rules:
            if isinstance(error, rule.exception):
                return application_error(error, rule.kind, retryable=rule.retryable)
        raise TypeError(f"no rule translates {type(error).__name__}") from error


SESSION_SETUP_FAILURES = Translation(
    Failure(NoPolicyServer, ErrorType.NO_POLICY_SERVER), Failure(UnknownParser, ErrorType.UNKNOWN_PARSER)
)
"""Opening an adapter session for a policy spec (rollout agents and drift -> repair roles alike)."""
