"""What the starter prints: a run's table of groups and samples, an episode run's table, and the status lines.

Every function returns text; nothing here prints or talks to Temporal.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from durable_rollouts.contracts.rollout_group import GroupResult, GroupSample, ProbeTally
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.grading import grading_summary
from durable_rollouts.trainer_client import rollout_queries

SAMPLE_HEADER = (
    f"{'instance':28} {'sample':>6} {'status':9} {'reward':>6} {'valid':>5} {'applied':>7} {'turns':>5} "
    f"{'tokens':>7} {'secs':>6}  reason"
)
EPISODE_HEADER = (
    f"{'task':22} {'grp':>3} {'smp':>3} {'status':9} {'primitive':22} {'spec':8} {'breaks':>6} "
    f"{'reward':>6} {'success':>7} {'drift_r':>7}  reason"
)


def summary_lines(groups: list[GroupResult]) -> list[str]:
    """A blank line and the header; per group (by group index) its group line, then one line per sample; last, the
    totals."""
    lines = ["", SAMPLE_HEADER]
    for group in sorted(groups, key=lambda g: g.group_index):
        lines.append(group_line(group))
        lines += [sample_line(group.prompt_key, sample) for sample in group.samples]
    valid_rewards = [reward for g in groups for reward, valid in zip(g.rewards, g.valid_mask, strict=True) if valid]
    by_status = {
        status: sum(g.status == status for g in groups) for status in ("completed", "insufficient", "cut", "failed")
    }
    counts = ", ".join(f"{n} {status}" for status, n in by_status.items() if n)
    mean = f"mean reward {statistics.fmean(valid_rewards):.3f}" if valid_rewards else "no valid samples"
    samples = sum(len(g.samples) for g in groups)
    graded = [sample for g in groups for sample in g.samples if sample.graded]
    tampered = f"; tampered {sum(sample.tampered for sample in graded)}/{len(graded)} graded" if graded else ""
    probes = ProbeTally.of(groups).summary()
    discarded = [run for g in groups for sample in g.samples if sample.rollout for run in sample.rollout.discarded]
    thrown = (
        f"; agent runs discarded {len(discarded)} ({sum(run.turns for run in discarded)} turns)" if discarded else ""
    )
    lines.append(
        f"groups {len(groups)}: {counts or 'none'}, {sum(not g.kept for g in groups)} dropped; samples valid "
        f"{len(valid_rewards)}/{samples}, {mean}" + tampered + (f"; {probes}" if probes else "") + thrown
    )
    return lines


def group_line(group: GroupResult) -> str:
    verdict = "kept" if group.kept else f"dropped_by {group.dropped_by}"
    why = group.abort_reason or group.note
    return (
        f"group {group.group_index} {group.prompt_key}: {group.status}  valid {group.n_valid}/{len(group.samples)}"
        f"  refilled {group.refilled}/{group.refill_budget}  {verdict}" + (f"  ({why})" if why else "")
    )


def sample_line(prompt_key: str, sample: GroupSample) -> str:
    r = sample.rollout
    if r is None:
        return (
            f"{prompt_key[:28]:28} {sample.sample_index:>6} {'-':9} {0.0:6.2f} {str(sample.valid):>5} {'-':>7} "
            f"{'-':>5} {'-':>7} {'-':>6}  {sample.invalid_reason or ''}"
        )
    tokens = sum(s.n_tokens for s in r.segments)
    turns = r.agent.turns if r.agent else 0
    empty = "patch: empty" if r.evaluation and grading_summary.patch_state(r.evaluation) == "empty" else ""
    tampered = "tampered" if sample.tampered else ""
    probe = f"probe: {sample.probe_verdict}" if sample.probe_verdict else ""
    reason = "  ".join(
        part
        for part in (sample.invalid_reason or r.abort_reason or "", empty, tampered, probe, *agent_run_notes(r))
        if part
    )
    return (
        f"{r.instance_id[:28]:28} {r.sample_index:>6} {r.status:9} {sample.reward:6.2f} {str(sample.valid):>5} "
        f"{str(r.applied_cleanly):>7}"
        f" {turns:>5} {tokens:>7} {r.elapsed_s:6.1f}  {reason}"
    )


def agent_run_notes(result: RolloutResult) -> list[str]:
    """What a rollout's agent runs lived through: the interruptions the kept run was resumed after, and each run
    thrown away for a fresh attempt (turns, sampled tokens, why). Empty when nothing happened."""
    notes = (
        [f"interrupted {result.agent.interruptions}x (resumed)"] if result.agent and result.agent.interruptions else []
    )
    notes += [
        f"discarded run {run.attempt}: {run.turns} turns, {run.sampled_tokens} sampled tokens ({run.reason})"
        for run in result.discarded
    ]
    return notes


def episode_summary_lines(groups: list[GroupResult]) -> list[str]:
    """A blank line and the header; per group (by group index) its group line, then one line per episode; last, the
    completed episodes' rates."""
    lines = ["", EPISODE_HEADER]
    for group in sorted(groups, key=lambda g: g.group_index):
        lines.append(group_line(group))
        for sample in group.samples:
            r = sample.episode
            if r is None:
                lines.append(
                    f"{group.prompt_key[:22]:22} {group.group_index:>3} {sample.sample_index:>3} {'-':9}  "
                    f"{sample.invalid_reason or ''}"
                )
                continue
            primitive = r.spec.primitive_type if r.spec else "-"
            lines.append(
                f"{r.task_id[:22]:22} {r.group_index:>3} {r.sample_index:>3} {r.status:9} {primitive:22} "
                f"{r.spec_source or '-':8} "
                f"{str(r.breakage_valid):>6} {r.reward:6.2f} {str(r.success):>7} {r.role_rewards.drift:7.2f}  "
                f"{sample.invalid_reason or r.abort_reason or ''}"
            )
    scored = [s.episode for g in groups for s in g.samples if s.episode is not None and s.episode.status == "completed"]
    if scored:
        lines.append(
            f"{len(scored)} completed episodes (of {sum(len(g.samples) for g in groups)}): success "
            f"{statistics.fmean(r.success for r in scored):.0%}, "
            f"breakage valid {statistics.fmean(r.breakage_valid for r in scored):.0%}, "
            f"mean repair reward {statistics.fmean(r.reward for r in scored):.3f}, "
            f"mean drift reward {statistics.fmean(r.role_rewards.drift for r in scored):.3f}"
        )
    return lines


def groups_line(g: rollout_queries.GroupCounts) -> str:
    closed = "  ".join(f"{status} {n}" for status, n in g.closed.items())
    return (
        f"groups: running {g.running} (samples done {g.done}, valid {g.valid}, refilled {g.refilled}; {g.answered} "
        f"answered)"
        f"  closed: {closed}  without a result {g.no_result}"
    )


def hosts_line(hosts: list[rollout_queries.HostSlots], booting: int) -> str:
    """``hosts: <queue> <in use>/<slots> slots, ...; <n> booting``; a queue no worker polls shows ``?`` slots and says
    so."""
    shown = [
        f"{h.host_queue} {h.in_use}/{h.agent_slots if h.agent_slots is not None else '?'} slots"
        + ("" if h.pollers else " (not polling)")
        for h in hosts
    ]
    return f"hosts: {', '.join(shown) or 'none'}; {booting} booting (host not yet recorded)"


def running_line(r: rollout_queries.RunningRollout, now: datetime) -> str:
    age = (now - r.started).total_seconds() / 60
    p = r.progress
    idle = r.idle_minutes(now)
    detail = f"attempt {p.attempt} turns {p.turns} host {p.host_queue or '-'}" if p else "(no progress answer)"
    idle_text = f"{idle:.1f}m" if idle is not None else "-"
    return f"  {r.workflow_id:50} {r.stage:8} age {age:6.1f}m  idle {idle_text:>6}  {detail}"
