"""The container environment that makes package tools work offline: from what the image holds, or not at all.

Invariant: in a sandbox booted with this environment, a package install (``pip install``, an isolated
build's build dependencies, ``uv``, ``conda``, ``npm``, a Hugging Face hub download) either works from
what the image has (pip looks only in the image's wheel directories, ``WHEEL_DIRS``) or fails at once
with the tool's own error, which lands in the grading log (or the agent's output). No tool waits on an
index it cannot reach: sandboxes have no route off the host (agent sandboxes sit on an internal bridge,
grading sandboxes have no network at all), so every index lookup could only hang, retry and fail.
"""

from __future__ import annotations

# Where an image keeps wheels: the task images' wheelhouse, then Debian's python-pip wheels; pip skips a
# directory that is missing (with a warning) and takes the list space-separated.
WHEEL_DIRS = ("/opt/wheels", "/usr/share/python-wheels")
PIP_TIMEOUT_S = 3

OFFLINE_ENV: dict[str, str] = {
    "PIP_NO_INDEX": "1",
    "PIP_FIND_LINKS": " ".join(WHEEL_DIRS),
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": str(PIP_TIMEOUT_S),
    "UV_OFFLINE": "1",
    "UV_FIND_LINKS": ",".join(WHEEL_DIRS),
    "CONDA_OFFLINE": "true",
    "NPM_CONFIG_OFFLINE": "true",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def offline_environment() -> list[str]:
    """``OFFLINE_ENV`` as Docker's ``KEY=value`` list for a container's environment."""
    return [f"{key}={value}" for key, value in OFFLINE_ENV.items()]
