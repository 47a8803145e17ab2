"""What the Docker sandbox raises; the activity faces translate these into activity errors."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """A sandbox operation failed for a reason retrying will not fix."""


class SandboxImageMissing(SandboxError):
    """The task image is neither on the engine nor in its registry (or it is absent and pulls are off):
    the row's fault, the same on every host."""


class RegistryAuthFailed(SandboxError):
    """The registry refused this host's credentials for the task image (the message names the registry)."""


class RegistryUnavailable(RuntimeError):
    """The registry could not be reached, failed, or the pull outlived its timeout: retrying may help."""


class DetachedLaunchFailed(SandboxError):
    """A detached command did not start (its name was already started, or its launch failed): nothing of it runs."""


class SandboxGone(SandboxError):
    """The container no longer exists or is not running."""
