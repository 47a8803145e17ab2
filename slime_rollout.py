"""Drop-in for slime's rollout function: ``--rollout-function-path slime_rollout.generate_rollout``.

``generate_rollout(args, rollout_id, data_source, evaluation=False)`` keeps slime's contract and returns
``RolloutFnTrainOutput(samples, metrics)``, but runs each prompt's ``n_samples_per_prompt`` samples as one
``RolloutGroup`` workflow (``trainer_client.rollout_groups.fill_batch``): a sample the infrastructure failed is
re-run by its group while the refill budget lasts, slime's filters and hooks are called as slime calls them, and
stragglers are handed back (``--partial-rollout``) or cut. docs/slime.md ("Whole GRPO groups from slime") states
every rule: ids, the two filters, stragglers, images ahead, probes, what slime gets.

Key invariants: every workflow id is fixed by ``ROLLOUT_RUN_ID``, the group index and the sample index, so a call or
a restarted trainer attaches to a group instead of running it twice; what still fails reaches the trainer as an
excluded sample, never as a reward. slime is optional: without it the output is this module's ``TrainOutput``.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import logging
import os
import statistics
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

import slime_generate
from durable_rollouts.config.settings import (
    SettingsError,
    budgets_from_env,
    impossible_share_from_env,
    prefetch_from_env,
)
from durable_rollouts.contracts.rollout_group import GroupFilter, GroupInput, GroupResult, GroupSample
from durable_rollouts.slime_samples.options import SampleOptions, sample_options
from durable_rollouts.task_sources.dataset_rows import RowError
from durable_rollouts.trainer_client.image_prefetch import ImagePrefetch
from durable_rollouts.trainer_client.rollout_groups import Accept, Batch, StragglerPolicy, fill_batch, group_id
from durable_rollouts.trainer_client.rollout_runs import task_queue_from_env
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env

log = logging.getLogger(__name__)
Result = TypeVar("Result")
# One group's Samples for slime: one list per sample (its segments, or its one excluded Sample).
GroupSamples = list[list[Any]]
# Groups in a row whose rows cannot run before the data source is taken for broken (not one more draw).
UNUSABLE_STREAK_LIMIT = 64


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """slime's rollout function; ``evaluation`` runs slime's own evaluation (``evaluate``)."""
    if evaluation:
        return evaluate(args, rollout_id, data_source)
    return run_blocking(generate_rollout_async(args, rollout_id, data_source))


async def generate_rollout_async(args: Any, rollout_id: int, data_source: Any) -> Any:
    """One training batch of groups (see the module docstring); the Temporal client is ``slime_generate``'s."""
    slime_generate.sample_contract()
    client = await slime_generate.temporal_client()
    source = GroupSource(args, data_source, group_rules_from_env())
    policy: StragglerPolicy = "handover" if getattr(args, "partial_rollout", False) else "cut"
    n_groups = int(args.rollout_batch_size)
    chunk = int(getattr(args, "over_sampling_batch_size", None) or n_groups)
    queue, server_wait = task_queue_from_env(), server_wait_from_env()

    def fill(wanted: int, accept: Accept) -> Awaitable[Batch]:
        return fill_batch(
            client, source, wanted, None, policy, queue, accept=accept, server_wait_s=server_wait, refetch_chunk=chunk
        )

    tokenizer = slime_generate.tokenizer_of(args)

    async def samples_for(result: GroupResult) -> GroupSamples:
        samples = source.samples_for(result, tokenizer, rollout_id)
        return await apply_sample_hooks(args, samples, rollout_id)

    filled = await fill_filtered_batch(fill, n_groups, samples_for, dynamic_filter_of(args))
    if policy == "handover" and filled.batch.handed_over:
        data_source.add_samples(
            [stamped(source.samples_of[group_id(group)], rollout_id) for group in filled.batch.handed_over]
        )
    run_batch_functions(args, filled, data_source)
    if prefetch_from_env():
        await prefetch_next(client, queue, data_source, chunk)
    metrics = rollout_metrics(filled, len(source.unusable))
    log.info("rollout %s: %s", rollout_id, metrics)
    return train_output(filled.samples, metrics)


def next_prompts(data_source: Any, n: int) -> list[Any]:
    """The next ``n`` prompts slime's data source will hand out, read without drawing them: slime's
    ``RolloutDataSource`` keeps them in ``dataset.samples`` from ``sample_offset``. None past the epoch's end (the
    next epoch is shuffled as it is drawn) or from a data source laid out otherwise."""
    samples, offset = (
        getattr(getattr(data_source, "dataset", None), "samples", None),
        getattr(data_source, "sample_offset", None),
    )
    if samples is None or not isinstance(offset, int):
        return []
    return list(samples[offset : offset + n])


async def prefetch_next(client: Any, queue: str, data_source: Any, n: int) -> None:
    """Tell the fleet the images of the next call's first ``n`` prompts (``next_prompts``), so hosts pull them
    while slime trains on this batch; a prompt whose row cannot run is left to the draw that sets it aside."""
    images = []
    for prompt in next_prompts(data_source, n):
        try:
            images.append(slime_generate.task_of(prompt).image)
        except RowError:
            continue
    if images:
        prefetch = ImagePrefetch(client, slime_generate.RUN_ID, queue)
        prefetch.announce(images, budgets_from_env().pull_timeout_s)
        await prefetch.settle()


def stamped(samples: list[Any], rollout_id: int) -> list[Any]:
    """A handed-back group's Samples with ``metadata.start_rollout_id`` (slime's ``abort``), kept when set."""
    for sample in samples:
        sample.metadata = sample.metadata if sample.metadata is not None else {}
        sample.metadata.setdefault("start_rollout_id", rollout_id)
    return samples


def evaluate(args: Any, rollout_id: int, data_source: Any) -> Any:
    """slime's own evaluation (``slime.rollout.sglang_rollout``: its eval datasets, its ``RolloutFnEvalOutput``),
    each eval sample run by ``--custom-generate-function-path``, ``slime_generate.generate`` unless set (which,
    called with ``evaluation=True``, returns one sample per rollout, as the reference example does)."""
    from slime.rollout.sglang_rollout import generate_rollout as slime_default_rollout

    eval_args = copy.copy(args)
    eval_args.custom_generate_function_path = (
        getattr(args, "custom_generate_function_path", None) or "slime_generate.generate"
    )
    return slime_default_rollout(eval_args, rollout_id, data_source, evaluation=True)


@dataclass(frozen=True)
class GroupRules:
    """The ``GroupInput`` rules every group of the run gets (None: the group's size)."""

    filter: GroupFilter = GroupFilter.KEEP_ALL
    min_valid: int | None = None
    refill_budget: int | None = None
    impossible_share: float = 0.0


def group_rules_from_env(env: Mapping[str, str] = os.environ) -> GroupRules:
    """``ROLLOUT_GROUP_FILTER`` (``keep_all``, the default, ``min_valid`` or ``nonzero_variance``),
    ``ROLLOUT_MIN_VALID`` and ``ROLLOUT_REFILL_BUDGET`` (counts; unset: the group's size),
    ``ROLLOUT_IMPOSSIBLE_SHARE`` (the share of drawn groups run as impossible-task probes; default 0)."""
    raw = env.get("ROLLOUT_GROUP_FILTER", "").strip() or GroupFilter.KEEP_ALL.value
    if raw not in {f.value for f in GroupFilter}:
        raise SettingsError(f"ROLLOUT_GROUP_FILTER: one of {', '.join(f.value for f in GroupFilter)}, got {raw!r}")
    return GroupRules(
        GroupFilter(raw),
        _count(env, "ROLLOUT_MIN_VALID"),
        _count(env, "ROLLOUT_REFILL_BUDGET"),
        impossible_share_from_env(env),
    )


def _count(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise SettingsError(f"{name}: expected a count (0 or more), got {raw!r}")
    return int(raw)


def sampling_params_of(args: Any) -> dict[str, Any]:
    """slime's rollout sampling flags (``--rollout-temperature`` / ``-top-p`` / ``-top-k`` / ``-max-response-len`` /
    ``-stop`` / ``-stop-token-ids``), as slime's ``GenerateState`` names them."""
    names = {
        "temperature": "rollout_temperature",
        "top_p": "rollout_top_p",
        "top_k": "rollout_top_k",
        "max_new_tokens": "rollout_max_response_len",
        "stop": "rollout_stop",
        "stop_token_ids": "rollout_stop_token_ids",
    }
    return {key: getattr(args, name, None) for key, name in names.items()}


def group_input(args: Any, samples: list[Any], rules: GroupRules) -> GroupInput:
    """One slime group (copies of one prompt, each numbered by slime's data source) as one ``GroupInput``, or
    the impossible-task probe made of its row when its group index is a probe slot of the run
    (``rules.impossible_share``); raises ``RowError`` when the prompt's row cannot run."""
    unnumbered = [
        position for position, sample in enumerate(samples) if sample.index is None or sample.group_index is None
    ]
    if unnumbered:
        raise ValueError(f"samples {unnumbered} of a group lack index / group_index, which fix their workflow ids")
    task = slime_generate.probe_or_task(
        slime_generate.task_of(samples[0]), samples[0].group_index, rules.impossible_share
    )
    params = sampling_params_of(args)
    return GroupInput(
        run_id=slime_generate.RUN_ID,
        group_index=samples[0].group_index,
        rollouts=[slime_generate.rollout_of(args, sample, task, params) for sample in samples],
        refill_budget=rules.refill_budget,
        min_valid=rules.min_valid,
        filter=rules.filter,
    )


class GroupSource:
    """slime's data source as ``fill_batch``'s ``next_groups``; every group drawn keeps its slime Samples
    (``samples_of``, by group workflow id) for the output and the handover."""

    def __init__(self, args: Any, data_source: Any, rules: GroupRules):
        self.args, self.data_source, self.rules = args, data_source, rules
        self.samples_of: dict[str, list[Any]] = {}
        self.unusable: list[list[Any]] = []
        self._unusable_streak = 0

    def __call__(self, k: int) -> list[GroupInput]:
        """Up to ``k`` groups (fewer once the data source gives none); a group whose row cannot run is set aside
        and replaced by a further draw, and ``UNUSABLE_STREAK_LIMIT`` of them in a row stop the run."""
        groups: list[GroupInput] = []
        while len(groups) < k and (drawn := self.data_source.get_samples(k - len(groups))):
            groups += [group for samples in drawn if (group := self._group_of(samples)) is not None]
        return groups

    def _group_of(self, samples: list[Any]) -> GroupInput | None:
        try:
            group = group_input(self.args, samples, self.rules)
        except RowError as error:
            log.warning("group %s set aside, its row cannot run: %s", samples[0].group_index, error)
            self.unusable.append(samples)
            self._unusable_streak += 1
            if self._unusable_streak >= UNUSABLE_STREAK_LIMIT:
                raise RuntimeError(
                    f"{self._unusable_streak} groups in a row whose rows cannot run (last: {error}): check the dataset"
                ) from error
            return None
        self._unusable_streak = 0
        self.samples_of[group_id(group)] = samples
        return group

    def samples_for(self, result: GroupResult, tokenizer: Any = None, rollout_id: int | None = None) -> GroupSamples:
        """The group's Samples for slime (``group_samples``); a group handed back by an earlier call, under
        ``args.mask_offpolicy_in_partial_rollout``, trains only on each sample's newest weight version."""
        drawn = self.samples_of[result.workflow_id]
        samples = group_samples(result, drawn, tokenizer, sample_options(self.args))
        started = (drawn[0].metadata or {}).get("start_rollout_id")
        resumed = started is not None and rollout_id is not None and started < rollout_id
        if (
            resumed
            and getattr(self.args, "partial_rollout", False)
            and getattr(self.args, "mask_offpolicy_in_partial_rollout", False)
        ):
            for fragments in samples:
                for sample in fragments:
                    mask_older_versions(sample)
        return samples


def mask_older_versions(sample: Any) -> None:
    """Context (loss_mask 0, log-prob 0) for every trained token not sampled by the newest version among the
    sample's trained tokens (one without a version included); its version spans and ``weight_versions`` follow."""
    spans = (sample.metadata or {}).get("weight_version_spans") or []
    if not spans or sample.loss_mask is None:
        return
    newest = spans[-1]["version"]
    fresh = [(span["start"], span["end"]) for span in spans if span["version"] == newest]
    keep = [0] * len(sample.loss_mask)
    for start, end in fresh:
        keep[start:end] = sample.loss_mask[start:end]
    sample.loss_mask = keep
    sample.rollout_log_probs = [p if m else 0.0 for p, m in zip(sample.rollout_log_probs, keep, strict=True)]
    sample.metadata["weight_version_spans"] = [span for span in spans if span["version"] == newest]
    sample.weight_versions = [version for version in sample.weight_versions if version == newest]


def group_samples(
    result: GroupResult, samples: list[Any], tokenizer: Any = None, options: SampleOptions | None = None
) -> GroupSamples:
    """One list per sample, in the group's order: a valid sample's segments, an invalid one excluded."""
    slots = {slot.sample_index: slot for slot in result.samples}
    neutral = mean_valid_reward(result.samples)
    out = []
    for sample in samples:
        slot = slots[sample.index]
        if slot.valid and slot.rollout is not None:
            fanned = slime_generate.samples_from_result(sample, slot.rollout, tokenizer, options=options)
        else:
            fanned = [exclude_sample(sample, slot, neutral, options)]
        for piece in fanned:
            piece.rollout_id = sample.index
        out.append(fanned)
    return out


def mean_valid_reward(slots: list[GroupSample]) -> float:
    valid = [slot.reward for slot in slots if slot.valid]
    return statistics.fmean(valid) if valid else 0.0


def exclude_sample(sample: Any, slot: GroupSample, neutral_reward: float, options: SampleOptions | None = None) -> Any:
    """An invalid sample as today's slime excludes it from the loss: ``remove_sample`` (slime then zeroes its
    ``loss_mask``), the aborted shape of ``slime_generate.abort_sample`` (no trainable token, status aborted),
    and ``neutral_reward`` (the group's mean valid reward): slime's GRPO normalisation subtracts the group's
    mean reward when the batch holds ``n_samples_per_prompt`` samples per group (``_post_process_rewards`` in
    ``slime/ray/rollout.py``), and this one leaves that mean as it is. ``metadata``: ``abort_reason``,
    ``invalid_outcome``, ``workflow_ids``."""
    slime_generate.abort_sample(sample, slot.invalid_reason or slot.outcome, options=options)
    sample.reward = neutral_reward
    sample.remove_sample = True
    sample.metadata |= {"invalid_outcome": slot.outcome, "workflow_ids": [run.workflow_id for run in slot.runs]}
    return sample


def rollout_view(samples: GroupSamples) -> list[Any]:
    """One Sample per rollout, its first, carrying the rollout's reward (the sum of its samples' under the seed
    contract's split, the first's otherwise): what slime's built-in dynamic filters read."""
    seed = slime_generate.sample_contract().name == "seed"
    view = []
    for fragments in samples:
        first = copy.copy(fragments[0])
        first.reward = sum(s.reward for s in fragments) if seed and not first.remove_sample else first.reward
        view.append(first)
    return view


async def apply_sample_hooks(
    args: Any, samples: GroupSamples, rollout_id: int | None, evaluation: bool = False
) -> GroupSamples:
    """``args.rollout_sample_hook_path`` on every Sample, as slime's default rollout applies it after generation:
    slime's own ``apply_rollout_sample_hooks`` when slime is installed, else the same rule (each hook
    ``fn(args, sample, **kwargs)`` with the keywords it accepts of ``rollout_id`` / ``evaluation``, awaited
    when it returns an awaitable; a returned sample replaces the one given)."""
    paths = getattr(args, "rollout_sample_hook_path", None) or []
    if not paths:
        return samples
    try:
        from slime.rollout.sample_hooks import apply_rollout_sample_hooks
    except ImportError:
        return [
            [await _hooked(args, sample, paths, rollout_id, evaluation) for sample in fragments]
            for fragments in samples
        ]
    return await apply_rollout_sample_hooks(args, samples, evaluation=evaluation, rollout_id=rollout_id)


async def _hooked(args: Any, sample: Any, paths: list[str], rollout_id: int | None, evaluation: bool) -> Any:
    offered = {"rollout_id": rollout_id, "evaluation": evaluation}
    for path in paths:
        hook = load_function(path)
        parameters = inspect.signature(hook).parameters.values()
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        kwargs = offered if takes_all else {k: v for k, v in offered.items() if k in {p.name for p in parameters}}
        result = hook(args, sample, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            sample = result
    return sample


def run_batch_functions(args: Any, filled: FilledBatch, data_source: Any) -> None:
    """slime's end-of-batch calls: ``rollout_sample_filter_path`` on the batch, then
    ``rollout_all_samples_process_path`` on every finished group (kept or dropped), both sorted by index."""
    if path := getattr(args, "rollout_sample_filter_path", None):
        load_function(path)(args, filled.samples)
    if path := getattr(args, "rollout_all_samples_process_path", None):
        everything = sorted(filled.all_samples, key=lambda group: group[0][0].index)
        load_function(path)(args, everything, data_source)


@dataclass(frozen=True)
class Verdict:
    """What slime's dynamic filter said of a group (its ``DynamicFilterOutput``, or a bare bool as ``keep``)."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


def load_function(path: str) -> Callable[..., Any]:
    """``package.module.function`` as slime's ``load_function`` reads it."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def dynamic_filter_of(args: Any) -> Callable[[GroupSamples], Verdict]:
    """``args.dynamic_sampling_filter_path`` as a judge of one group's Samples, called as slime calls it,
    ``fn(args, samples)``, with ``rollout_view(samples)`` (one Sample per rollout); unset: every group is kept."""
    path = getattr(args, "dynamic_sampling_filter_path", None)
    if not path:
        return lambda samples: Verdict(keep=True)
    function = load_function(path)

    def judge(samples: GroupSamples) -> Verdict:
        output = function(args, rollout_view(samples))
        return Verdict(
            keep=bool(getattr(output, "keep", output)),
            reason=getattr(output, "reason", None),
            keep_when_insufficient=bool(getattr(output, "keep_when_insufficient", False)),
        )

    return judge


@dataclass
class FilledBatch:
    """``batch`` (``groups`` the kept ones, sorted by group index; ``dropped`` with the dynamic filter's rejects);
    ``samples`` the kept groups' Samples, in the same order; ``all_samples`` every judged group's, kept or not;
    ``drops`` the dynamic filter's reasons."""

    batch: Batch = field(default_factory=Batch)
    samples: list[GroupSamples] = field(default_factory=list)
    all_samples: list[GroupSamples] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)


Fill = Callable[[int, Accept], Awaitable[Batch]]


async def fill_filtered_batch(
    fill: Fill,
    n_groups: int,
    samples_for: Callable[[GroupResult], Awaitable[GroupSamples]],
    judge: Callable[[GroupSamples], Verdict],
) -> FilledBatch:
    """One ``fill(n_groups, accept)`` whose ``accept`` is slime's dynamic filter on the group's Samples: a group
    it rejects is dropped and replaced inside the same batch, unless it is marked ``keep_when_insufficient``
    and ``remaining`` (the started groups not dropped, this one included) is at most ``n_groups``, which
    keeps it (slime's ``should_drop_dynamic_filter_output``)."""
    filled = FilledBatch()
    samples_of: dict[str, GroupSamples] = {}

    async def accept(result: GroupResult, remaining: int) -> bool:
        samples = await samples_for(result)
        filled.all_samples.append(samples)
        verdict = judge(samples)
        keep = verdict.keep or (verdict.keep_when_insufficient and remaining <= n_groups)
        if keep:
            samples_of[result.workflow_id] = samples
        elif verdict.reason:
            filled.drops[verdict.reason] += 1
        return keep

    batch = await fill(n_groups, accept)
    batch.groups.sort(key=lambda group: group.group_index)
    filled.batch = batch
    filled.samples = [samples_of[group.workflow_id] for group in batch.groups]
    return filled


def rollout_metrics(filled: FilledBatch, unusable_rows: int) -> dict[str, float]:
    """``Batch.metrics()`` as ``rollout/<name>``, slime's ``rollout/dynamic_filter/drop_<reason>`` counts, and
    ``rollout/groups_unusable_row``."""
    metrics = {f"rollout/{name}": value for name, value in filled.batch.metrics().items()}
    metrics |= {f"rollout/dynamic_filter/drop_{reason}": count for reason, count in filled.drops.items()}
    metrics["rollout/groups_unusable_row"] = unusable_rows
    return metrics


@dataclass
class TrainOutput:
    """slime's ``RolloutFnTrainOutput`` (same fields), for when slime is not installed."""

    samples: list[GroupSamples]
    metrics: dict[str, Any] | None = None


def train_output(samples: list[GroupSamples], metrics: dict[str, Any]) -> Any:
    try:
        from slime.rollout.base_types import RolloutFnTrainOutput
    except ImportError:
        return TrainOutput(samples=samples, metrics=metrics)
    return RolloutFnTrainOutput(samples=samples, metrics=metrics)


def run_blocking(coroutine: Coroutine[Any, Any, Result]) -> Result:
    """Run ``coroutine`` to its end from synchronous code, always on the same long-lived event loop (slime's
    ``slime.utils.async_utils.run``, where slime also runs ``slime_generate.generate``, or this module's), so
    the cached Temporal client is only ever used on the loop that connected it."""
    try:
        from slime.utils.async_utils import run
    except ImportError:
        return asyncio.run_coroutine_threadsafe(coroutine, _own_loop()).result()
    return run(coroutine)


@lru_cache(maxsize=1)
def _own_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="slime-rollout-loop", daemon=True).start()
    return loop
