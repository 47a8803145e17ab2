"""Which sample contract is in force: the override, else the installed slime's API."""

import os
import subprocess
import sys

import pytest

from durable_rollouts.config.settings import SettingsError
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.slime_samples import registry


def forget_slime(monkeypatch) -> None:
    """Drop every imported ``slime`` module for this test (monkeypatch restores the real state after it)."""
    for name in [m for m in sys.modules if m == "slime" or m.startswith("slime.")]:
        monkeypatch.delitem(sys.modules, name)
    registry.detected_contract.cache_clear()


@pytest.fixture
def installed_slime(tmp_path, monkeypatch):
    """Install a minimal ``slime`` package in ``tmp_path``; ``install(seed_api)`` writes its ``slime.agent.trajectory``
    (the seed API, ``TrajectoryManager``, or None: no such module)."""

    def install(seed_api: bool | None) -> None:
        package = tmp_path / "slime"
        (package / "agent").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "agent" / "__init__.py").write_text("")
        if seed_api is not None:
            body = (
                "def fan_out_sample_segments(*a):\n    pass\n" if seed_api else "class TrajectoryManager:\n    pass\n"
            )
            (package / "agent" / "trajectory.py").write_text(body)
        monkeypatch.syspath_prepend(str(tmp_path))
        forget_slime(monkeypatch)

    yield install
    for name in [m for m in sys.modules if m == "slime" or m.startswith("slime.")]:
        del sys.modules[name]  # not monkeypatch: its undo would put this test's fake slime back
    registry.detected_contract.cache_clear()


@pytest.mark.parametrize("seed_api, expected", [(True, "seed"), (False, "current"), (None, "current")])
def test_auto_reads_the_installed_slime(installed_slime, seed_api, expected):
    installed_slime(seed_api)
    choice = registry.contract_in_force({})
    assert choice.name == expected and choice.reason.startswith("auto:")
    assert choice.log_line.startswith(f"slime sample contract: {expected} (auto:")


def test_without_slime_today_s_contract_is_in_force(monkeypatch):
    forget_slime(monkeypatch)
    monkeypatch.setitem(sys.modules, "slime", None)
    try:
        assert registry.contract_in_force({"ROLLOUT_SLIME_SAMPLE_CONTRACT": ""}).name == "current"
    finally:
        registry.detected_contract.cache_clear()


def test_the_override_wins_over_detection(installed_slime):
    installed_slime(True)
    choice = registry.contract_in_force({"ROLLOUT_SLIME_SAMPLE_CONTRACT": "Current"})
    assert (choice.name, choice.reason) == ("current", "ROLLOUT_SLIME_SAMPLE_CONTRACT=current")


def test_a_bad_name_is_an_error_naming_the_variable():
    with pytest.raises(
        SettingsError, match="ROLLOUT_SLIME_SAMPLE_CONTRACT='newest': expected one of auto, current, seed"
    ):
        registry.contract_in_force({"ROLLOUT_SLIME_SAMPLE_CONTRACT": "newest"})


def test_a_worker_with_a_bad_contract_name_stops_at_start_up_with_one_line():
    env = {**os.environ, "ROLLOUT_SLIME_SAMPLE_CONTRACT": "newest"}
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "worker.py")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert (
        done.stderr.strip().splitlines()[-1]
        == "worker: ROLLOUT_SLIME_SAMPLE_CONTRACT='newest': expected one of auto, current, seed"
    )


def test_a_slime_that_does_not_import_here_reads_as_current(installed_slime, tmp_path):
    installed_slime(None)
    (tmp_path / "slime" / "agent" / "trajectory.py").write_text("import torch_that_is_not_installed\n")
    choice = registry.contract_in_force({})
    assert choice.name == "current" and "does not import here (ModuleNotFoundError" in choice.reason
