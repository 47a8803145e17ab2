"""``ROLLOUT_POLICY_ENGINE``: the protocol of the worker's policy server, SGLang's unless it says vLLM's."""

from __future__ import annotations

import pytest

from durable_rollouts.config.settings import SettingsError, settings_from_env


def test_unset_is_sglang_and_vllm_is_taken():
    assert settings_from_env({}).policy_engine == "sglang"
    assert settings_from_env({"ROLLOUT_POLICY_ENGINE": " vllm "}).policy_engine == "vllm"


def test_an_unknown_engine_is_refused_naming_the_variable_and_the_choices():
    with pytest.raises(SettingsError, match=r"ROLLOUT_POLICY_ENGINE: 'trtllm' is not one of sglang, vllm"):
        settings_from_env({"ROLLOUT_POLICY_ENGINE": "trtllm"})
