"""Drop-in for slime's coding-agent example: ``--custom-generate-function-path slime_generate.generate``.

``generate(args, sample, sampling_params)`` keeps the reference's contract but runs the rollout as a
``CodingAgentRollout`` workflow on the workers, waits for it and turns the result into slime Samples under the sample
contract in force (``slime_samples.registry``: ``current`` for today's slime, ``seed`` before June 2026), with every
sampled token's log-prob and weight version. An aborted rollout, or one the trainer could not start or collect,
becomes the reference's aborted sample with its reason. docs/slime.md states the contracts, the settings it reads
and the staleness policy (``mask`` by default: a dropped sample would be a zero the infrastructure made).

Key invariant: the workflow id is derived from the run (``ROLLOUT_RUN_ID``), the instance id, ``sample.index`` and
``sample.group_index``, so a restarted trainer re-attaches and never runs a sample twice. slime is optional:
``samples_from_result`` works on any object with ``Sample``'s attributes; ``slime_rollout`` shares ``task_of``,
``rollout_of``, ``temporal_client`` and ``tokenizer_of``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from temporalio.client import Client

from durable_rollouts.config.settings import (
    SettingsError,
    budgets_from_env,
    impossible_share_from_env,
    policy_engine_from_env,
    staleness_from_env,
)
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.policy.parsers import (
    UnknownParser,
    known_parser_name,
    reasoning_parser_named,
    tool_call_parser_named,
)
from durable_rollouts.policy.trajectory_packing import read_trajectory
from durable_rollouts.slime_samples.options import SampleOptions, replay_of, sample_options
from durable_rollouts.slime_samples.registry import ContractChoice, contract_in_force
from durable_rollouts.slime_samples.sample_fields import ReplayMissing, status, write_aborted, write_untrained
from durable_rollouts.task_sources.dataset_rows import RowError, task_from_row
from durable_rollouts.task_sources.impossible_probes import ProbeUnavailable, probe_for_slot
from durable_rollouts.trainer_client.rollout_runs import collect_rollout, connect, rollout_input, task_queue_from_env
from durable_rollouts.trainer_client.temporal_connection import target_from_env
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env

RUN_ID = os.environ.get("ROLLOUT_RUN_ID") or time.strftime("slime-%Y%m%d-%H%M%S")
_clients: dict[str, Client] = {}
_announced: set[ContractChoice] = set()
logger = logging.getLogger(__name__)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> list[Any]:
    """One rollout as slime Samples: its training samples, or with ``evaluation`` one sample carrying its reward
    (``eval_sample``). ``SettingsError`` under ``--partial-rollout``: slime's default rollout hands partial
    samples back one ``Sample`` per rollout, and a rollout here is a list of them; ``slime_rollout`` keeps
    stragglers running instead."""
    if getattr(args, "partial_rollout", False) and not evaluation:
        raise SettingsError(PARTIAL_ROLLOUT_REFUSED)
    contract, options = sample_contract(), sample_options(args)
    try:
        task = task_of(sample)
    except RowError as error:
        missing = error.field in ("metadata.image", "metadata.workdir")
        return [
            abort_sample(
                sample, "missing_image_or_workdir" if missing else f"invalid_row:{error.field}", contract, options
            )
        ]
    if not evaluation:
        task = probe_or_task(task, _index(sample, "group_index"), impossible_share_from_env())
    rollout = rollout_of(args, sample, task, sampling_params)
    result = await collect_rollout(
        await temporal_client(), rollout, RUN_ID, task_queue_from_env(), server_wait_from_env()
    )
    if evaluation:
        return [eval_sample(sample, result)]
    if task.probe is not None:
        return [probe_sample(sample, result)]
    return samples_from_result(sample, result, tokenizer_of(args), contract, options)


def probe_or_task(task: TaskSpec, group_index: int, share: float) -> TaskSpec:
    """The impossible-task probe of ``task`` when ``group_index`` is one of the run's probe slots for ``share``
    (``durable_rollouts.task_sources.impossible_probes``), else ``task`` (also when the row has nothing to flip)."""
    try:
        return probe_for_slot(task, RUN_ID, group_index, share) or task
    except ProbeUnavailable as error:
        logger.info("group %s runs as drawn, no impossible-task probe: %s", group_index, error)
        return task


def probe_sample(sample: Any, result: RolloutResult) -> Any:
    """An impossible-task probe's rollout as slime gets it: ``eval_sample``'s untrained sample (``remove_sample``),
    reward 0, ``metadata.impossible_probe`` its verdict (``cheated``, ``held``, ``void``; ``not_graded``) and
    ``metadata.probe_instance_id`` the probe's instance id (``metadata.instance_id`` stays the row's)."""
    row_instance = (sample.metadata or {}).get("instance_id")
    probed = eval_sample(sample, result)
    probed.reward = 0.0
    verdict = result.evaluation.probe if result.evaluation else None
    probed.metadata |= {"instance_id": row_instance, "probe_instance_id": result.instance_id}
    probed.metadata["impossible_probe"] = verdict.verdict if verdict else "not_graded"
    return probed


PARTIAL_ROLLOUT_REFUSED = (
    "slime_generate.generate cannot run under --partial-rollout: slime's default rollout hands partial samples back "
    "one Sample per rollout, and a coding-agent rollout is a list of them; use "
    "--rollout-function-path slime_rollout.generate_rollout, which hands unfinished groups back and keeps them running"
)


def eval_sample(sample: Any, result: RolloutResult) -> Any:
    """The reference example's eval sample: one per rollout, ``reward`` the grade (0 when aborted), no trainable
    token (tokens ``[0, 0]``, ``loss_mask [0]``, ``remove_sample``), status completed (aborted when the rollout
    was), metadata ``instance_id``, ``grading_solved``, ``applied_cleanly``, ``agent_exit_code``, ``workflow_id``."""
    if result.status != "completed":
        write_aborted(sample, result.abort_reason or "not_completed")
    else:
        write_untrained(sample)
        sample.reward = float(result.reward)
        sample.status = status(sample, "COMPLETED")
    sample.remove_sample = True
    sample.metadata = {
        **(sample.metadata or {}),
        "instance_id": result.instance_id,
        "grading_solved": result.solved,
        "applied_cleanly": result.applied_cleanly,
        "agent_exit_code": result.agent.exit_code if result.agent is not None else None,
        "workflow_id": result.workflow_id,
    }
    return sample


async def temporal_client() -> Client:
    """One client per Temporal address and namespace (``durable_rollouts.trainer_client.temporal_connection``: a
    ``temporal.toml`` profile and the ``TEMPORAL_*`` variables, TLS and API key included), connected on first
    use (callers stay on one event loop); a server unreachable at first use is waited for as for an outage."""
    target = target_from_env()
    key = f"{target.namespace}@{target.address}"
    if key not in _clients:
        _clients[key] = await connect(server_wait_s=server_wait_from_env())
    return _clients[key]


def task_of(sample: Any) -> TaskSpec:
    """The sample's dataset row (``prompt``, ``label``, ``metadata``) as a task; ``RowError`` names what makes it
    unusable."""
    return task_from_row(
        {"prompt": sample.prompt, "label": getattr(sample, "label", None), "metadata": sample.metadata or {}}
    )


def rollout_of(args: Any, sample: Any, task: TaskSpec, sampling_params: dict[str, Any]) -> RolloutInput:
    """The sample's rollout: ``sample.index`` / ``sample.group_index`` (None: 0) fix its workflow id within the run."""
    policy = policy_for(args, sampling_params)
    return rollout_input(task, _index(sample, "index"), _index(sample, "group_index"), policy, budgets_from_env())


def policy_for(args: Any, sampling_params: dict[str, Any]) -> PolicySpec:
    """Trainer-side session settings: slime's sampling params, context length, router address, parser names
    (``--sglang-tool-call-parser`` / ``--sglang-reasoning-parser``; unset, the worker's) and the engine behind the
    router (``ROLLOUT_POLICY_ENGINE`` in the trainer's environment, ``vllm`` for a vLLM-based slime; unset, the
    worker's)."""
    keys = ("temperature", "top_p", "top_k", "max_new_tokens", "stop", "stop_token_ids")
    known = {k: sampling_params[k] for k in keys if sampling_params.get(k) is not None}
    if isinstance(known.get("stop"), str):
        known["stop"] = [known["stop"]]
    router_ip, router_port = getattr(args, "sglang_router_ip", None), getattr(args, "sglang_router_port", None)
    context = getattr(args, "rollout_max_context_len", None)
    return PolicySpec(
        policy_url=f"http://{router_ip}:{router_port}" if router_ip and router_port else None,
        sampling=SamplingParams(**known),
        context_budget=context or PolicySpec().context_budget,
        policy_tag=str(getattr(args, "hf_checkpoint", "") or ""),
        replay=replay_of(args),
        staleness=staleness_from_env(),
        engine=policy_engine_from_env(),
        tool_parser=_parser_arg(args, "sglang_tool_call_parser", tool_call_parser_named),
        reasoning_parser=_parser_arg(args, "sglang_reasoning_parser", reasoning_parser_named),
    )


def _parser_arg(args: Any, name: str, lookup: Callable[[str], object]) -> str | None:
    """``args.<name>`` when set, checked here so a wrong name stops the trainer instead of every rollout."""
    value = getattr(args, name, None) or None
    try:
        return None if value is None else known_parser_name(lookup, value, f"--{name.replace('_', '-')}")
    except UnknownParser as error:
        raise SettingsError(str(error)) from None


def samples_from_result(
    sample: Any,
    result: RolloutResult,
    tokenizer: Any = None,
    contract: ContractChoice | None = None,
    options: SampleOptions | None = None,
) -> list[Any]:
    """``result`` as slime Samples under ``contract`` (default: the one in force, ``sample_contract()``) and
    ``options`` (default: no cut, slime's fork threshold)."""
    chosen, options = contract or sample_contract(), options or SampleOptions()
    if result.status != "completed" or result.trajectory is None:
        unread = result.status == "completed" and bool(result.segments)  # its group left it to a child not read
        return [
            chosen.aborted(
                sample, result.abort_reason or ("trajectory_unreadable" if unread else "adapter_session_empty"), options
            )
        ]
    try:
        samples = chosen.samples(sample, result, read_trajectory(result.trajectory), tokenizer, options)
    except ReplayMissing as missing:
        logger.warning("rollout %s: %s", result.workflow_id, missing)
        return [chosen.aborted(sample, "replay_data_missing", options)]
    return samples or [chosen.aborted(sample, "adapter_session_empty", options)]


def sample_dicts(result: RolloutResult, contract: ContractChoice | None = None) -> list[dict[str, Any]]:
    """The same samples without slime: one plain dict per sample (or one aborted dict)."""
    return [vars(s) for s in samples_from_result(_PlainSample(), result, contract=contract)]


def abort_sample(
    sample: Any, reason: str, contract: ContractChoice | None = None, options: SampleOptions | None = None
) -> Any:
    """The aborted sample of the contract in force (``current`` also sets ``remove_sample``), with the replay
    placeholders ``options`` ask for."""
    return (contract or sample_contract()).aborted(sample, reason, options)


def sample_contract() -> ContractChoice:
    """The sample contract in force (``durable_rollouts.slime_samples.registry``), logged once per process."""
    choice = contract_in_force()
    if choice not in _announced:
        logger.info(choice.log_line)
        _announced.add(choice)
    return choice


def _index(sample: Any, name: str) -> int:
    value = getattr(sample, name, None)
    return int(value) if value is not None else 0


@lru_cache(maxsize=4)
def _tokenizer_for(path: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def tokenizer_of(args: Any) -> Any:
    """``args.hf_checkpoint``'s tokenizer (decodes ``Sample.response``), or None without a checkpoint."""
    path = getattr(args, "hf_checkpoint", None)
    return _tokenizer_for(str(path)) if path else None


class _PlainSample:
    """Attribute bag standing in for slime's ``Sample`` when slime is not installed."""

    index = None
    metadata: dict[str, Any] | None = None
