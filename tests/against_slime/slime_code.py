"""slime's own code for the checks: its conversion methods taken out of ``slime/ray/rollout.py``, and the args it reads.

Imported only by the ``tests/against_slime`` modules, after they skip without a checkout."""

from __future__ import annotations

import ast
import logging
from types import SimpleNamespace

import slime.ray
import torch
from slime.observability.rollout_data_utils import validate_rollout_routed_experts_for_replay
from slime.utils.data import get_source
from slime.utils.types import Sample

from tests.slime_args import slime_args

ROLLOUT_PY = slime.ray.__path__[0] + "/rollout.py"


def slime_conversion(args):
    """``RolloutManager._post_process_rewards`` and ``_convert_samples_to_train_data`` from slime's own source, on an
    object with the attributes they read (the class needs Ray and a GPU server to construct)."""
    tree = ast.parse(open(ROLLOUT_PY).read())
    (manager,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "RolloutManager"]
    wanted = {"_post_process_rewards", "_convert_samples_to_train_data"}
    methods = [node for node in manager.body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    holder = ast.ClassDef(name="Conversion", bases=[], keywords=[], body=methods, decorator_list=[], type_params=[])
    module = ast.fix_missing_locations(ast.Module(body=[holder], type_ignores=[]))
    scope = {
        "torch": torch,
        "Sample": Sample,
        "get_source": get_source,
        "validate_rollout_routed_experts_for_replay": validate_rollout_routed_experts_for_replay,
        "logger": logging.getLogger("slime.ray.rollout"),
    }
    exec(compile(module, ROLLOUT_PY, "exec"), scope)
    conversion = scope["Conversion"]()
    (
        conversion.args,
        conversion.custom_convert_samples_to_train_data_func,
        conversion.custom_reward_post_process_func,
    ) = args, None, None
    return conversion


def args_for(**extra) -> SimpleNamespace:
    """The stand-in tests' slime args plus what slime's own reward conversion and eval state read."""
    defaults = {
        "rollout_batch_size": 2,
        "over_sampling_batch_size": 2,
        "partial_rollout": False,
        "rollout_max_context_len": 0,
        "reward_key": None,
        "advantage_estimator": "grpo",
        "rewards_normalization": True,
        "grpo_std_normalization": True,
        "rollout_top_p": 1.0,
        "use_rollout_routing_replay": False,
        "custom_rm_path": None,
    }
    return slime_args(**(defaults | extra))
