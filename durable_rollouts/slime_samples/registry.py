"""Which sample contract is in force: named by ``ROLLOUT_SLIME_SAMPLE_CONTRACT``, else read off the installed slime.

``ROLLOUT_SLIME_SAMPLE_CONTRACT`` is ``seed``, ``current`` or ``auto`` (unset
or empty: ``auto``). ``auto`` imports ``slime.agent.trajectory``, where both
APIs live: the seed's ``fan_out_sample_segments`` (slime ad3b874 to 243773c)
means ``seed``; anything else (``TrajectoryManager``, slime not installed, or
a slime that does not import here, such as a worker host without its
dependencies) means ``current`` (what a trainer installing slime today gets). Any other value is a ``SettingsError``
naming the variable. ``ContractChoice.log_line`` is the one line the worker and the trainer log at start-up.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

from durable_rollouts.config.settings import SettingsError
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples import current, seed
from durable_rollouts.slime_samples.options import SampleOptions

ENV_VAR = "ROLLOUT_SLIME_SAMPLE_CONTRACT"
CONTRACTS: dict[str, ModuleType] = {seed.NAME: seed, current.NAME: current}
PROBED_MODULE = "slime.agent.trajectory"
SEED_API = "fan_out_sample_segments"


@dataclass(frozen=True)
class ContractChoice:
    name: str
    reason: str

    @property
    def samples(self) -> Callable[[Any, RolloutResult, Trajectory, Any, SampleOptions], list[Any]]:
        return CONTRACTS[self.name].samples

    @property
    def aborted(self) -> Callable[..., Any]:
        """``aborted(sample, reason, options=None)``."""
        return CONTRACTS[self.name].aborted

    @property
    def log_line(self) -> str:
        return f"slime sample contract: {self.name} ({self.reason}); set {ENV_VAR}=seed|current|auto to choose"


def contract_in_force(environ: Mapping[str, str] = os.environ) -> ContractChoice:
    value = (environ.get(ENV_VAR) or "auto").strip().lower()
    if value == "auto":
        return detected_contract()
    if value in CONTRACTS:
        return ContractChoice(value, f"{ENV_VAR}={value}")
    raise SettingsError(f"{ENV_VAR}={environ.get(ENV_VAR)!r}: expected one of auto, {', '.join(sorted(CONTRACTS))}")


@lru_cache(maxsize=1)
def detected_contract() -> ContractChoice:
    """The contract the installed slime speaks (imported once per process)."""
    try:
        module = importlib.import_module(PROBED_MODULE)
    except ImportError as missing:
        if missing.name == "slime":
            found = "slime is not installed"
        elif missing.name in ("slime.agent", PROBED_MODULE):
            found = f"the installed slime has no {missing.name}"
        else:
            found = f"{PROBED_MODULE} does not import here ({type(missing).__name__}: {missing})"
        return ContractChoice(current.NAME, f"auto: {found}")
    if hasattr(module, SEED_API):
        return ContractChoice(
            seed.NAME, f"auto: the installed slime has {PROBED_MODULE}.{SEED_API} (ad3b874 to 243773c)"
        )
    return ContractChoice(current.NAME, f"auto: the installed slime has no {PROBED_MODULE}.{SEED_API} (243773c on)")
