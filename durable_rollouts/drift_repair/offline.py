"""Score seeded-baseline episodes over the whole corpus in seconds, without Temporal or Docker.

The same pieces as the workflow (baseline drift, oracle/noop repair,
``apply_diff``, ``judge_breakage``, ``grade_runs``), with every script run
batched through one ``LocalScriptRunner`` harness call per phase. It checks
the loop itself, on the project's own corpus; policy output is only ever run
in sandboxes, by the workflow.

    python -m durable_rollouts.drift_repair.offline --repair oracle [--difficulty easy] [--seed 0]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Literal

from durable_rollouts.contracts.drift_repair import BreakageRun, DriftSpec, DriftTask, RepairGrade
from durable_rollouts.drift_repair.baselines import baseline_drift, noop_repair, oracle_repair
from durable_rollouts.drift_repair.corpus import load_corpus, tasks_of
from durable_rollouts.drift_repair.primitives import apply_spec
from durable_rollouts.drift_repair.scoring import grade_not_applied, grade_runs, judge_breakage
from durable_rollouts.drift_repair.script_runner import LocalScriptRunner
from durable_rollouts.drift_repair.unified_diff import DiffError, apply_diff


@dataclass(frozen=True)
class OfflineEpisode:
    task_id: str
    spec: DriftSpec
    breakage: BreakageRun
    grade: RepairGrade


def score_corpus(
    tasks: list[DriftTask], repair: Literal["oracle", "noop"], seed: int = 0, timeout_s: float = 5.0
) -> list[OfflineEpisode]:
    runner = LocalScriptRunner()
    specs = [baseline_drift(task.script, seed, task.category) for task in tasks]
    broken = [apply_spec(task.script, spec).script for task, spec in zip(tasks, specs, strict=True)]
    breakages = [
        judge_breakage(outcome, timeout_s)
        for outcome in runner.run_many(
            [(script, task.visible.stdin) for task, script in zip(tasks, broken, strict=True)], timeout_s
        )
    ]
    repaired: list[str | DiffError] = []
    for task, script in zip(tasks, broken, strict=True):
        diff = oracle_repair(script, task.script) if repair == "oracle" else noop_repair()
        try:
            repaired.append(apply_diff(script, diff))
        except DiffError as error:
            repaired.append(error)
    jobs = [
        (script, case.stdin)
        for task, script in zip(tasks, repaired, strict=True)
        if isinstance(script, str)
        for case in [task.visible, *task.held_out]
    ]
    outcomes = iter(runner.run_many(jobs, timeout_s))
    episodes = []
    for task, spec, breakage, applied in zip(tasks, specs, breakages, repaired, strict=True):
        if isinstance(applied, DiffError):
            grade = grade_not_applied(task, str(applied))
        else:
            grade = grade_runs(task, [next(outcomes) for _ in range(1 + len(task.held_out))])
        episodes.append(OfflineEpisode(task.task_id, spec, breakage, grade))
    return episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repair", choices=["oracle", "noop"], default="oracle")
    parser.add_argument("--difficulty", choices=["easy", "medium", "hard"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    episodes = score_corpus(tasks_of(load_corpus(), args.difficulty), args.repair, args.seed)
    for e in episodes:
        print(
            f"{e.task_id:22} {e.spec.primitive_type:22} valid={e.breakage.valid!s:5} reward={e.grade.reward:.2f} "
            f"success={e.grade.success}"
        )
    valid = sum(e.breakage.valid for e in episodes)
    solved = sum(e.grade.success for e in episodes)
    print(f"{len(episodes)} episodes: breakage valid {valid}, success {solved} ({solved / max(len(episodes), 1):.0%})")


if __name__ == "__main__":
    main()
