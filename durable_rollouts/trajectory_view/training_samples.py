"""What the sample contract in force makes of a trajectory, told per sample and per turn for a page.

Invariants:

* ``current``: the samples are ``message_tree.sequences_of`` the trajectory with the options' fork threshold and
  cut, exactly what ``slime_samples.current`` hands slime; a turn *trains* in the samples whose origins overlap
  its reply (``cut`` when the sample's cap shortened it), else it is *masked* (the staleness bound zeroed its loss
  mask), *past the cap* (it would train in a sample the cap ended before it), *context* (its reply's ids sit untrained in a sample: merged or shared), *realigned* (a sample holds its
  segment but a later prompt's tokens in its place), *dropped* (in no sample) or *empty* (no output);
* ``seed``: one sample per segment, every sampled token of it trained, each carrying ``1 / segments`` of the
  reward, as ``slime_samples.seed``;
* every turn of the trajectory has one fate; turn numbers are the conversation's (record order from 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from durable_rollouts.contracts.rollout import TurnLog
from durable_rollouts.slime_samples.message_tree import TrainingSequence, sequences_of
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.trajectory_view.conversation import SegmentConversation


@dataclass(frozen=True)
class SampleView:
    index: int
    n_tokens: int
    response_start: int
    trained: int
    segments: list[int]
    turns: list[int]
    reward_share: float
    truncated: bool = False
    at_cap: bool = False


@dataclass(frozen=True)
class TurnFate:
    kind: str
    samples: list[int]

    @property
    def label(self) -> str:
        where = ", ".join(str(s + 1) for s in self.samples)
        return {
            "trains": f"trains in sample {where}",
            "cut": f"cut: part trains in sample {where}",
            "past_cap": f"past the cap of sample {where}: not trained",
            "context": f"context only, in sample {where}",
            "realigned": f"realigned: a later prompt's tokens replace it in sample {where}",
            "masked": "masked by the staleness bound",
            "dropped": "in no sample",
            "empty": "empty output: nothing to train",
        }[self.kind]


@dataclass(frozen=True)
class SamplePlan:
    contract: str
    reason: str
    options: SampleOptions
    samples: list[SampleView]
    fates: dict[int, TurnFate]


def sample_plan(conversations: list[SegmentConversation], turn_log: TurnLog | None, contract: str, reason: str, options: SampleOptions) -> SamplePlan:
    """The samples ``contract`` (``seed`` or ``current``) makes of the trajectory the conversations read."""
    if contract == "seed":
        return _seed(conversations, reason, options)
    segments = [c.segment for c in conversations]
    sequences = sequences_of(segments, turn_log, options.fork_threshold, options.max_sample_tokens)
    uncut = sequences_of(segments, turn_log, options.fork_threshold) if options.max_sample_tokens else sequences
    beyond = _trained_in(conversations, uncut)
    trained_in = _trained_in(conversations, sequences)
    samples = [
        _view(j, sequence, [n for n, where in trained_in.items() if j in where], len(uncut[j].tokens) > len(sequence.tokens))
        for j, sequence in enumerate(sequences)
    ]
    cut = {n for n, where in trained_in.items() if any(_origin_cut(conversations, sequences[j], n) for j in where)}
    fates = {}
    for c in conversations:
        for reply in c.replies:
            if reply.end == reply.start:
                fates[reply.number] = TurnFate("empty", [])
            elif not any(c.segment.loss_mask[reply.start : reply.end]):
                fates[reply.number] = TurnFate("masked", [])
            elif reply.number in trained_in:
                fates[reply.number] = TurnFate("cut" if reply.number in cut else "trains", trained_in[reply.number])
            elif reply.number in beyond:
                fates[reply.number] = TurnFate("past_cap", beyond[reply.number])
            else:
                found = _context_in(np.asarray(c.segment.tokens[reply.start : reply.end], dtype=np.int32), sequences)
                realigned = [s.index for s in samples if c.index in s.segments]
                if found:
                    fates[reply.number] = TurnFate("context", found)
                elif realigned:
                    fates[reply.number] = TurnFate("realigned", realigned)
                else:
                    fates[reply.number] = TurnFate("dropped", [])
    return SamplePlan("current", reason, options, samples, fates)


def _trained_in(conversations: list[SegmentConversation], sequences: list[TrainingSequence]) -> dict[int, list[int]]:
    """Each reply's number -> the sequences whose trained origins overlap it."""
    found: dict[int, list[int]] = {}
    for j, sequence in enumerate(sequences):
        for origin in sequence.origins:
            for reply in conversations[origin.segment].replies:
                if reply.start < origin.at + origin.length and origin.at < reply.end and j not in found.get(reply.number, []):
                    found.setdefault(reply.number, []).append(j)
    return found


def _origin_cut(conversations: list[SegmentConversation], sequence: TrainingSequence, number: int) -> bool:
    """Reply ``number`` trains in ``sequence`` only up to the sequence's cap."""
    for origin in sequence.origins:
        for reply in conversations[origin.segment].replies:
            if reply.number == number and reply.start < origin.at + origin.length < reply.end:
                return True
    return False


def _view(index: int, sequence: TrainingSequence, turns: list[int], at_cap: bool) -> SampleView:
    """``truncated``: slime's metadata (a turn of it finished by length); ``at_cap``: the cut shortened it."""
    return SampleView(
        index=index,
        n_tokens=len(sequence.tokens),
        response_start=sequence.response_start,
        trained=int(sum(sequence.loss_mask)),
        segments=list(dict.fromkeys(sequence.segments)),
        turns=turns,
        reward_share=1.0,
        truncated=sequence.truncated,
        at_cap=at_cap,
    )


def _context_in(reply: np.ndarray, sequences: list[TrainingSequence]) -> list[int]:
    """The sequences holding ``reply``'s ids as a contiguous untrained run."""
    needle = reply.tobytes()
    found = []
    for j, sequence in enumerate(sequences):
        tokens = np.asarray(sequence.tokens, dtype=np.int32)
        haystack, at = tokens.tobytes(), 0
        while (at := haystack.find(needle, at)) >= 0:
            if at % 4 == 0 and not any(sequence.loss_mask[at // 4 : at // 4 + len(reply)]):
                found.append(j)
                break
            at += 1
    return found


def _seed(conversations: list[SegmentConversation], reason: str, options: SampleOptions) -> SamplePlan:
    share = 1.0 / max(len(conversations), 1)
    samples, fates = [], {}
    for c in conversations:
        numbers = [r.number for r in c.replies if any(c.segment.loss_mask[r.start : r.end])]
        samples.append(
            SampleView(
                index=c.index,
                n_tokens=len(c.segment.tokens),
                response_start=c.segment.prompt_length,
                trained=sum(c.segment.loss_mask),
                segments=[c.index],
                turns=numbers,
                reward_share=share,
            )
        )
        for reply in c.replies:
            if reply.end == reply.start:
                fates[reply.number] = TurnFate("empty", [])
            else:
                fates[reply.number] = TurnFate("trains", [c.index]) if reply.number in numbers else TurnFate("masked", [])
    return SamplePlan("seed", reason, options, samples, fates)
