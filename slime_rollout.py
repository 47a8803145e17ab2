"""Drop-in for slime's rollout function: ``--rollout-function-path slime_rollout.generate_rollout``.

``generate_rollout(args, rollout_id, data_source, evaluation=False)`` keeps
slime's contract and returns ``RolloutFnTrainOutput(samples, metrics)``, but
runs every prompt's ``n_samples_per_prompt`` samples as one ``RolloutGroup``
workflow (``trainer_client.rollout_groups.fill_batch``): a sample the
infrastructure failed is re-run by the group while its refill budget lasts,
and what still fails never reaches the trainer as a reward.

Invariants:

* **Groups come from slime's data source**: ``data_source.get_samples(k)``
  gives slime groups (one prompt's Samples each); each becomes one
  ``GroupInput`` whose rollouts ``slime_generate`` builds as it does for one
  sample, under ``slime_generate.RUN_ID`` and the Samples' ``group_index`` /
  ``index``, so every workflow id is fixed and a call (or a restarted trainer
  with the same ``ROLLOUT_RUN_ID``) attaches to a group instead of running it
  twice. A row that cannot run is set aside (``rollout/groups_unusable_row``)
  and replaced by another draw.
* **Batches**: ``args.rollout_batch_size`` groups out of at most
  ``args.over_sampling_batch_size`` started (one more for each dropped). A
  finished group must pass the group filter (``ROLLOUT_GROUP_FILTER``, judged
  by the workflow) and then ``args.dynamic_sampling_filter_path`` (slime's
  ``fn(args, samples)``, on its Samples); a group either rejects is replaced
  by another in the same batch, and a rejected group marked
  ``keep_when_insufficient`` fills the batch only if the source ran dry.
* **Stragglers**: with ``args.partial_rollout`` the groups still running once
  the batch is full are handed back, their Samples untouched, through
  ``data_source.add_samples``; their workflows keep running and the next call,
  drawing them again, attaches to them. Without it they are cut (agents
  stopped, sandboxes destroyed) and, like finished groups beyond the batch,
  not kept.
* **Samples out**: one list per group (sorted by group index) of one list per
  sample: a valid sample's segments as ``slime_generate.samples_from_result``
  makes them, an invalid one (an infrastructure or task failure the refills
  could not replace) as one excluded Sample (``exclude_sample``): never a
  reward of its own. Every Sample's ``rollout_id`` is its ``index``.

slime is optional: without it the output is this module's ``TrainOutput``
(slime's fields) and coroutines run on this module's own event loop.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
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
from config.settings import SettingsError
from contracts.rollout_group import GroupFilter, GroupInput, GroupResult, GroupSample
from starter import task_queue_from_env
from task_sources.dataset_rows import RowError
from trainer_client.rollout_groups import Batch, StragglerPolicy, fill_batch, group_id
from trainer_client.workflow_runs import server_wait_from_env

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
    over_sample = getattr(args, "over_sampling_batch_size", None) or n_groups
    queue, server_wait = task_queue_from_env(), server_wait_from_env()

    def fill(wanted: int, accept: Callable[[GroupResult], bool]) -> Awaitable[Batch]:
        return fill_batch(client, source, wanted, over_sample, policy, queue, accept=accept, server_wait_s=server_wait)

    tokenizer = slime_generate.tokenizer_of(args)
    filled = await fill_filtered_batch(fill, n_groups, lambda result: source.samples_for(result, tokenizer), dynamic_filter_of(args))
    if policy == "handover" and filled.batch.handed_over:
        data_source.add_samples([source.samples_of[group_id(group)] for group in filled.batch.handed_over])
    metrics = rollout_metrics(filled, len(source.unusable))
    log.info("rollout %s: %s", rollout_id, metrics)
    return train_output(filled.samples, metrics)


def evaluate(args: Any, rollout_id: int, data_source: Any) -> Any:
    """slime's own evaluation (``slime.rollout.sglang_rollout``: its eval datasets, its ``RolloutFnEvalOutput``),
    each eval sample run by ``--custom-generate-function-path``, ``slime_generate.generate`` unless set."""
    from slime.rollout.sglang_rollout import generate_rollout as slime_default_rollout

    eval_args = copy.copy(args)
    eval_args.custom_generate_function_path = getattr(args, "custom_generate_function_path", None) or "slime_generate.generate"
    return slime_default_rollout(eval_args, rollout_id, data_source, evaluation=True)


@dataclass(frozen=True)
class GroupRules:
    """The ``GroupInput`` rules every group of the run gets (None: the group's size)."""

    filter: GroupFilter = GroupFilter.KEEP_ALL
    min_valid: int | None = None
    refill_budget: int | None = None


def group_rules_from_env(env: Mapping[str, str] = os.environ) -> GroupRules:
    """``ROLLOUT_GROUP_FILTER`` (``keep_all``, the default, ``min_valid`` or ``nonzero_variance``),
    ``ROLLOUT_MIN_VALID`` and ``ROLLOUT_REFILL_BUDGET`` (counts; unset: the group's size)."""
    raw = env.get("ROLLOUT_GROUP_FILTER", "").strip() or GroupFilter.KEEP_ALL.value
    if raw not in {f.value for f in GroupFilter}:
        raise SettingsError(f"ROLLOUT_GROUP_FILTER: one of {', '.join(f.value for f in GroupFilter)}, got {raw!r}")
    return GroupRules(GroupFilter(raw), _count(env, "ROLLOUT_MIN_VALID"), _count(env, "ROLLOUT_REFILL_BUDGET"))


def _count(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise SettingsError(f"{name}: expected a count (0 or more), got {raw!r}")
    return int(raw)


def sampling_params_of(args: Any) -> dict[str, Any]:
    """slime's rollout sampling flags (``--rollout-temperature`` / ``-top-p`` / ``-top-k`` / ``-max-response-len``)."""
    names = {"temperature": "rollout_temperature", "top_p": "rollout_top_p", "top_k": "rollout_top_k", "max_new_tokens": "rollout_max_response_len"}
    return {key: getattr(args, name, None) for key, name in names.items()}


def group_input(args: Any, samples: list[Any], rules: GroupRules) -> GroupInput:
    """One slime group (copies of one prompt, each numbered by slime's data source) as one ``GroupInput``;
    raises ``RowError`` when the prompt's row cannot run."""
    unnumbered = [position for position, sample in enumerate(samples) if sample.index is None or sample.group_index is None]
    if unnumbered:
        raise ValueError(f"samples {unnumbered} of a group lack index / group_index, which fix their workflow ids")
    task = slime_generate.task_of(samples[0])
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
                raise RuntimeError(f"{self._unusable_streak} groups in a row whose rows cannot run (last: {error}): check the dataset") from error
            return None
        self._unusable_streak = 0
        self.samples_of[group_id(group)] = samples
        return group

    def samples_for(self, result: GroupResult, tokenizer: Any = None) -> GroupSamples:
        """The group's Samples for slime (``group_samples``); fills the drawn Samples in."""
        return group_samples(result, self.samples_of[result.workflow_id], tokenizer)


def group_samples(result: GroupResult, samples: list[Any], tokenizer: Any = None) -> GroupSamples:
    """One list per sample, in the group's order: a valid sample's segments, an invalid one excluded."""
    slots = {slot.sample_index: slot for slot in result.samples}
    neutral = mean_valid_reward(result.samples)
    out = []
    for sample in samples:
        slot = slots[sample.index]
        if slot.valid and slot.rollout is not None:
            fanned = slime_generate.samples_from_result(sample, slot.rollout, tokenizer)
        else:
            fanned = [exclude_sample(sample, slot, neutral)]
        for piece in fanned:
            piece.rollout_id = sample.index
        out.append(fanned)
    return out


def mean_valid_reward(slots: list[GroupSample]) -> float:
    valid = [slot.reward for slot in slots if slot.valid]
    return statistics.fmean(valid) if valid else 0.0


def exclude_sample(sample: Any, slot: GroupSample, neutral_reward: float) -> Any:
    """An invalid sample as today's slime excludes it from the loss: ``remove_sample`` (slime then zeroes its
    ``loss_mask``), the aborted shape of ``slime_generate.abort_sample`` (no trainable token, status aborted),
    and, as slime still averages its reward into the group's, ``neutral_reward`` (the group's mean valid reward),
    which leaves that mean as it is. ``metadata``: ``abort_reason``, ``invalid_outcome``, ``workflow_ids``."""
    slime_generate.abort_sample(sample, slot.invalid_reason or slot.outcome)
    sample.reward = neutral_reward
    sample.remove_sample = True
    sample.metadata |= {"invalid_outcome": slot.outcome, "workflow_ids": [run.workflow_id for run in slot.runs]}
    return sample


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
    ``fn(args, samples)`` (one list per sample); unset: every group is kept."""
    path = getattr(args, "dynamic_sampling_filter_path", None)
    if not path:
        return lambda samples: Verdict(keep=True)
    function = load_function(path)

    def judge(samples: GroupSamples) -> Verdict:
        output = function(args, samples)
        return Verdict(
            keep=bool(getattr(output, "keep", output)),
            reason=getattr(output, "reason", None),
            keep_when_insufficient=bool(getattr(output, "keep_when_insufficient", False)),
        )

    return judge


@dataclass
class FilledBatch:
    """``batch`` (``groups`` the kept ones, sorted by group index; ``dropped`` with the dynamic filter's rejects);
    ``samples`` the kept groups' Samples, in the same order; ``drops`` the dynamic filter's reasons."""

    batch: Batch = field(default_factory=Batch)
    samples: list[GroupSamples] = field(default_factory=list)
    drops: Counter[str] = field(default_factory=Counter)


Fill = Callable[[int, Callable[[GroupResult], bool]], Awaitable[Batch]]


async def fill_filtered_batch(
    fill: Fill, n_groups: int, samples_for: Callable[[GroupResult], GroupSamples], judge: Callable[[GroupSamples], Verdict]
) -> FilledBatch:
    """One ``fill(n_groups, accept)`` whose ``accept`` is slime's dynamic filter on the group's Samples, so a
    group it rejects is replaced by another inside the same batch (no straggler is cut for it). A rejected group
    marked ``keep_when_insufficient`` is held back and fills the batch only if it came back short (the source
    ran dry); one not needed then counts as dropped, with its reason."""
    filled = FilledBatch()
    samples_of: dict[str, GroupSamples] = {}
    held_back: list[tuple[GroupResult, GroupSamples, Verdict]] = []

    def accept(result: GroupResult) -> bool:
        samples = samples_for(result)
        verdict = judge(samples)
        if verdict.keep:
            samples_of[result.workflow_id] = samples
        elif verdict.keep_when_insufficient:
            held_back.append((result, samples, verdict))
        elif verdict.reason:
            filled.drops[verdict.reason] += 1
        return verdict.keep

    batch = await fill(n_groups, accept)
    for result, samples, verdict in held_back:
        if len(batch.groups) < n_groups:
            batch.dropped = [group for group in batch.dropped if group.workflow_id != result.workflow_id]
            batch.groups.append(result)
            samples_of[result.workflow_id] = samples
        elif verdict.reason:
            filled.drops[verdict.reason] += 1
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
