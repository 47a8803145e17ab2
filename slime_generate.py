"""Drop-in for slime's coding-agent example: ``--custom-generate-function-path slime_generate.generate``.

``generate(args, sample, sampling_params)`` keeps the reference's contract but
runs the rollout as a ``CodingAgentRollout`` workflow on the workers: it starts
the workflow (or re-attaches to it: the id is derived from the run, the
instance id, ``sample.index`` and ``sample.group_index``, so a restarted
trainer never runs a sample twice), waits for it, and fans the result out into
one sample per token segment:

* every segment's sample shares ``rollout_id`` (= ``sample.index``) and gets
  ``tokens`` (prompt + response), ``response_length``, ``loss_mask`` and
  ``rollout_log_probs`` over the response, ``response`` (decoded, for reading
  only), ``reward`` = trajectory reward / number of segments (so the trajectory
  counts once), ``status`` completed, ``weight_versions`` as slime fills it
  (one entry per generate call that sampled tokens of the segment and
  reported a version: the version of its last token, i.e. that reply's
  ``meta_info.weight_version``), and metadata (``instance_id``,
  ``is_solved``, ``applied_cleanly``, ``elapsed_sec``, ``segment_kind``,
  ``segment_idx``, ``num_segments``, ``workflow_id``, and
  ``weight_version_spans``: the segment's spans as ``{"version", "start",
  "end"}`` over the response, aligned with ``loss_mask``, the exact version
  of every sampled token);
* an aborted rollout becomes the reference's aborted sample: tokens ``[0, 0]``,
  ``response_length`` 1, ``loss_mask [0]``, reward 0, no weight versions, status aborted,
  ``metadata.abort_reason``; so does a rollout the trainer could not start or
  collect (``workflow_runs``: a refused start, a Temporal outage longer than
  ``ROLLOUT_SERVER_WAIT_S``, default 300 s, is waited out until then), with
  that failure's reason.

slime is optional: ``samples_from_result`` works on any object with slime's
``Sample`` attributes, and ``sample_dicts`` gives the same data as plain dicts.
``slime_rollout`` (whole groups as slime's rollout function) builds its
rollouts with ``task_of`` / ``rollout_of`` and shares ``temporal_client``,
``tokenizer_of`` and the fan-out.
Settings: ``TEMPORAL_ADDRESS`` / ``TEMPORAL_NAMESPACE`` / ``ROLLOUT_TASK_QUEUE``,
``ROLLOUT_RUN_ID`` (default: one id per trainer process), the ``SWE_*`` budget
knobs, ``args.rollout_max_context_len`` (context budget) and
``args.sglang_router_ip/port`` (the policy URL, unless the worker pins its own),
``ROLLOUT_MAX_STALENESS`` / ``ROLLOUT_STALENESS_POLICY`` (a staleness bound;
unset, none). The drop-in's policy defaults to ``mask``: a dropped sample
reaches slime as an aborted sample with reward 0, a zero the infrastructure
made inside a GRPO group, while a masked one keeps its reward and its fresh
turns, with the stale turns as context (``loss_mask`` 0) and every trained
token's version in ``weight_versions`` / ``metadata.weight_version_spans``.
"""

from __future__ import annotations

import copy
import os
import time
from functools import lru_cache
from typing import Any

from temporalio.client import Client

from config.settings import budgets_from_env, staleness_from_env
from contracts.rollout import PolicySpec, RolloutInput, RolloutResult, SamplingParams, TaskSpec, TokenSegment
from policy.trajectory_store import TrajectoryStore
from starter import collect_rollout, connect, rollout_input, task_queue_from_env
from task_sources.dataset_rows import RowError, task_from_row
from trainer_client.workflow_runs import server_wait_from_env

RUN_ID = os.environ.get("ROLLOUT_RUN_ID") or time.strftime("slime-%Y%m%d-%H%M%S")
_clients: dict[str, Client] = {}


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any]) -> list[Any]:
    try:
        task = task_of(sample)
    except RowError as error:
        missing = error.field in ("metadata.image", "metadata.workdir")
        return [abort_sample(sample, "missing_image_or_workdir" if missing else f"invalid_row:{error.field}")]
    rollout = rollout_of(args, sample, task, sampling_params)
    result = await collect_rollout(await temporal_client(), rollout, RUN_ID, task_queue_from_env(), server_wait_from_env())
    return samples_from_result(sample, result, tokenizer_of(args))


async def temporal_client() -> Client:
    """One client per ``TEMPORAL_ADDRESS``, connected on first use (callers stay on one event loop)."""
    address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
    if address not in _clients:
        _clients[address] = await connect(address)
    return _clients[address]


def task_of(sample: Any) -> TaskSpec:
    """The sample's dataset row (``prompt``, ``label``, ``metadata``) as a task; ``RowError`` names what makes it unusable."""
    return task_from_row({"prompt": sample.prompt, "label": getattr(sample, "label", None), "metadata": sample.metadata or {}})


def rollout_of(args: Any, sample: Any, task: TaskSpec, sampling_params: dict[str, Any]) -> RolloutInput:
    """The sample's rollout: ``sample.index`` / ``sample.group_index`` (None: 0) fix its workflow id within the run."""
    policy = policy_for(args, sampling_params)
    return rollout_input(task, _index(sample, "index"), _index(sample, "group_index"), policy, budgets_from_env())


def policy_for(args: Any, sampling_params: dict[str, Any]) -> PolicySpec:
    """Trainer-side session settings: slime's sampling params, context length and router address."""
    known = {k: sampling_params[k] for k in ("temperature", "top_p", "top_k", "max_new_tokens") if sampling_params.get(k) is not None}
    router_ip, router_port = getattr(args, "sglang_router_ip", None), getattr(args, "sglang_router_port", None)
    context = getattr(args, "rollout_max_context_len", None)
    return PolicySpec(
        policy_url=f"http://{router_ip}:{router_port}" if router_ip and router_port else None,
        sampling=SamplingParams(**known),
        context_budget=context or PolicySpec().context_budget,
        policy_tag=str(getattr(args, "hf_checkpoint", "") or ""),
        staleness=staleness_from_env(),
    )


def samples_from_result(sample: Any, result: RolloutResult, tokenizer: Any = None) -> list[Any]:
    if result.status != "completed" or result.trajectory is None:
        return [abort_sample(sample, result.abort_reason or "adapter_session_empty")]
    segments = TrajectoryStore.load(result.trajectory)
    fanned = []
    for index, segment in enumerate(segments):
        target = sample if index == 0 else copy.copy(sample)
        _write_segment(target, segment, result, index, len(segments), tokenizer)
        fanned.append(target)
    return fanned


def sample_dicts(result: RolloutResult) -> list[dict[str, Any]]:
    """The same fan-out without slime: one plain dict per segment (or one aborted dict)."""
    return [vars(s) for s in samples_from_result(_PlainSample(), result)]


def abort_sample(sample: Any, reason: str) -> Any:
    sample.tokens = [0, 0]
    sample.response = ""
    sample.response_length = 1
    sample.loss_mask = [0]
    sample.rollout_log_probs = [0.0]
    sample.reward = 0.0
    sample.weight_versions = []
    sample.status = _status(sample, "ABORTED")
    sample.metadata = {**(getattr(sample, "metadata", None) or {}), "abort_reason": reason}
    return sample


def _write_segment(sample: Any, segment: TokenSegment, result: RolloutResult, index: int, count: int, tokenizer: Any) -> None:
    response = segment.tokens[segment.prompt_length :]
    sample.tokens = list(segment.tokens)
    sample.response_length = len(response)
    sample.loss_mask = list(segment.loss_mask[segment.prompt_length :])
    sample.rollout_log_probs = list(segment.rollout_log_probs[segment.prompt_length :])
    sample.response = tokenizer.decode(response, skip_special_tokens=False) if tokenizer is not None else ""
    sample.reward = result.reward / count
    sample.weight_versions = call_weight_versions(segment)
    sample.status = _status(sample, "COMPLETED")
    sample.rollout_id = getattr(sample, "index", None)
    sample.metadata = {
        **(getattr(sample, "metadata", None) or {}),
        "instance_id": result.instance_id,
        "is_solved": result.solved,
        "applied_cleanly": result.applied_cleanly,
        "elapsed_sec": result.elapsed_s,
        "workflow_id": result.workflow_id,
        "segment_kind": segment.kind,
        "segment_idx": index,
        "num_segments": count,
        "weight_version_spans": [
            {"version": span.version, "start": span.start - segment.prompt_length, "end": span.end - segment.prompt_length}
            for span in segment.weight_version_spans
        ],
    }


def call_weight_versions(segment: TokenSegment) -> list[str]:
    """slime's ``Sample.weight_versions``: per generate call of the segment (each a run of sampled tokens), the
    version of its last token when it has one."""
    versions = segment.token_weight_versions()
    return [version for _, end in segment.sampled_runs() if (version := versions[end - 1]) is not None]


def _status(sample: Any, name: str) -> Any:
    status_enum = getattr(type(sample), "Status", None)
    return getattr(status_enum, name) if status_enum is not None else name.lower()


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
