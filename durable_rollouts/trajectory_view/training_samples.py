"""What the sample contract in force makes of a trajectory, told per sample and per turn for a page.

Invariants:

* ``current``: the samples are ``message_tree.sequences_of`` the trajectory with the options' fork threshold and
  cut, exactly what ``slime_samples.current`` hands slime; a turn *trains* in the samples whose origins overlap
  its reply (``cut`` when the sample's cap shortened it), else it is *masked* (the staleness bound zeroed its loss
  mask), *past the cap* (it would train in a sample the cap ended before it), *context* (its reply's ids sit untrained
  in a sample: merged or shared), *realigned* (a sample holds its segment but a later prompt's tokens in its place),
  *dropped* (in no sample) or *empty* (no output);
* ``seed``: one sample per segment, every sampled token of it trained, each carrying ``1 / segments`` of the
  reward, as ``slime_samples.seed``;
* every turn of the trajectory has one fate; turn numbers are the conversation's (record order from 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from durable_rollouts.contracts.tokens import TurnLog
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


def sample_plan(
    conversations: list[SegmentConversation],
    turn_log: TurnLog | None,
    contract: str,
    reason: str,
    options: SampleOptions,
) -> SamplePlan:
    """The samples ``contract`` (``seed`` or ``current``) makes of the trajectory the conversations read."""
    if contract == "seed":
        return _seed(conversations, reason, options)
    segments = [c.segment for c in conversations]
    sequences = sequences_of(segments, turn_log, options.fork_threshold, options.max_sample_tokens)
    uncut = sequences_of(segments, turn_log, options.fork_threshold) if options.max_sample_tokens else sequences
    trained = _Coverage.of(conversations, sequences)
    beyond = _Coverage.of(conversations, uncut).samples if uncut is not sequences else {}
    samples = [
        _view(j, sequence, trained.per_sequence[j], len(uncut[j].tokens) > len(sequence.tokens))
        for j, sequence in enumerate(sequences)
    ]
    held = [(np.asarray(s.tokens, dtype=np.int32).tobytes(), s.loss_mask) for s in sequences]
    fates = {}
    for c in conversations:
        for reply in c.replies:
            if reply.end == reply.start:
                fates[reply.number] = TurnFate("empty", [])
            elif not any(c.segment.loss_mask[reply.start : reply.end]):
                fates[reply.number] = TurnFate("masked", [])
            elif reply.number in trained.samples:
                fates[reply.number] = TurnFate(
                    "cut" if reply.number in trained.cut else "trains", trained.samples[reply.number]
                )
            elif reply.number in beyond:
                fates[reply.number] = TurnFate("past_cap", beyond[reply.number])
            elif found := _context_in(np.asarray(c.segment.tokens[reply.start : reply.end], dtype=np.int32), held):
                fates[reply.number] = TurnFate("context", found)
            elif realigned := [s.index for s in samples if c.index in s.segments]:
                fates[reply.number] = TurnFate("realigned", realigned)
            else:
                fates[reply.number] = TurnFate("dropped", [])
    return SamplePlan("current", reason, options, samples, fates)


@dataclass
class _Coverage:
    """Which sequences train which replies: ``samples`` by reply number, ``per_sequence`` by sequence, and
    ``cut``, the replies a sequence trains only up to its end."""

    samples: dict[int, list[int]]
    per_sequence: list[list[int]]
    cut: set[int]

    @classmethod
    def of(cls, conversations: list[SegmentConversation], sequences: list[TrainingSequence]) -> _Coverage:
        replies = [c.replies for c in conversations]
        coverage = cls({}, [[] for _ in sequences], set())
        for j, sequence in enumerate(sequences):
            for origin in sequence.origins:
                stop = origin.at + origin.length
                for reply in replies[origin.segment]:
                    if not (reply.start < stop and origin.at < reply.end):
                        continue
                    if j not in coverage.samples.setdefault(reply.number, []):
                        coverage.samples[reply.number].append(j)
                        coverage.per_sequence[j].append(reply.number)
                    if stop < reply.end:
                        coverage.cut.add(reply.number)
        return coverage


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


def _context_in(reply: np.ndarray, held: list[tuple[bytes, list[int]]]) -> list[int]:
    """The sequences (as int32 bytes and loss mask) holding ``reply``'s ids as a contiguous untrained run."""
    needle = reply.tobytes()
    found = []
    for j, (haystack, mask) in enumerate(held):
        at = 0
        while (at := haystack.find(needle, at)) >= 0:
            if at % 4 == 0 and not any(mask[at // 4 : at // 4 + len(reply)]):
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
                fates[reply.number] = (
                    TurnFate("trains", [c.index]) if reply.number in numbers else TurnFate("masked", [])
                )
    return SamplePlan("seed", reason, options, samples, fates)
