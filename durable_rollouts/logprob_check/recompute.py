"""The trainer's side: each version's checkpoint, in float32, recomputes the log-prob of every token it sampled.

For each version, the model of its checkpoint runs one forward pass over each sequence holding tokens of that
version; the log-prob of the token at position p is ``log_softmax(logits[p - 1])[tokens[p]]``, the raw distribution
(vLLM's default ``raw_logprobs``; SGLang's are after temperature, so compare at temperature 1 there). A trained token
whose version has no checkpoint is an error naming the version, never skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as transformers_logging

from durable_rollouts.logprob_check.report import DEFAULT_THRESHOLD, LogprobReport, Offender, VersionStats
from durable_rollouts.logprob_check.sequences import TrainedSequence


class MissingCheckpoint(LookupError):
    """Trained tokens carry a version no checkpoint was given for."""


def check_log_probs(
    sequences: Sequence[TrainedSequence],
    checkpoints: Mapping[str | None, Path],
    threshold: float = DEFAULT_THRESHOLD,
) -> LogprobReport:
    """Recompute every trained token with its version's checkpoint (``checkpoints``; the key None stands for tokens
    with no version) and report (``LogprobReport``)."""
    wanted: dict[str | None, list[TrainedSequence]] = defaultdict(list)
    for sequence in sequences:
        for version in dict.fromkeys(version for _, _, version in sequence.trained()):
            wanted[version].append(sequence)
    missing = sorted(str(version) for version in wanted if version not in checkpoints)
    if missing:
        raise MissingCheckpoint(
            f"no checkpoint for weight version(s) {', '.join(missing)}: pass --checkpoint VERSION=DIR for each"
        )
    found: list[tuple[int, int, Offender]] = []  # (sample index, position, offender) of every token
    order = {id(sequence): index for index, sequence in enumerate(sequences)}
    stats = []
    transformers_logging.disable_progress_bar()  # a bar per checkpoint load would bury the report
    with torch.no_grad():
        for version, holders in wanted.items():
            checkpoint = checkpoints[version]
            model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()
            tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
            worst = 0.0
            count = 0
            for sequence in holders:
                recomputed = _log_probs(model, sequence.tokens)
                for position, rollout, token_version in sequence.trained():
                    if token_version != version:
                        continue
                    token = sequence.tokens[position]
                    offender = Offender(
                        sample=sequence.name,
                        position=position,
                        token_id=token,
                        text=tokenizer.decode([token]),
                        version=version,
                        rollout_log_prob=rollout,
                        trainer_log_prob=float(recomputed[position - 1]),
                    )
                    found.append((order[id(sequence)], position, offender))
                    worst = max(worst, offender.delta)
                    count += 1
            stats.append(VersionStats(version=version, checkpoint=str(checkpoint), tokens=count, max_abs_delta=worst))
    found.sort(key=lambda item: (item[0], item[1]))
    deltas = [offender.delta for _, _, offender in found]
    over = [offender for _, _, offender in found if offender.delta > threshold]
    return LogprobReport(
        threshold=threshold,
        samples=len(sequences),
        tokens=len(deltas),
        max_abs_delta=max(deltas, default=0.0),
        mean_abs_delta=sum(deltas) / len(deltas) if deltas else 0.0,
        over=len(over),
        first_offender=over[0] if over else None,
        by_version=stats,
    )


def _log_probs(model: torch.nn.Module, tokens: list[int]) -> torch.Tensor:
    """``out[p - 1]`` = log p(tokens[p] | tokens[:p]) for p >= 1."""
    ids = torch.tensor([tokens], dtype=torch.long)
    logits = model(input_ids=ids).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
