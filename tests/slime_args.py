"""The slime ``args`` the drop-in tests call the rollout function with (slime's names, small values)."""

from types import SimpleNamespace


def slime_args(**overrides) -> SimpleNamespace:
    values = {
        "rollout_batch_size": 2,
        "over_sampling_batch_size": 3,
        "n_samples_per_prompt": 2,
        "partial_rollout": True,
        "sglang_router_ip": None,
        "sglang_router_port": None,
        "rollout_max_context_len": 65536,
        "rollout_max_response_len": 2048,
        "rollout_temperature": 0.7,
        "hf_checkpoint": "",
    }
    return SimpleNamespace(**(values | overrides))
