"""What the Docker sandbox raises; the activity faces translate these into activity errors."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """A sandbox operation failed for a reason retrying will not fix."""


class SandboxImageMissing(SandboxError):
    """The task image is not present locally (there is no registry to pull from)."""


class SandboxGone(SandboxError):
    """The container no longer exists or is not running."""
