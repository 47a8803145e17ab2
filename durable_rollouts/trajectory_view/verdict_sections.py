"""A rollout page's verdict: the patch (added and removed lines marked, what the cap left out), the grading
(grader, how the patch applied, tests, reward, reset paths, tampering evidence, probe verdict, the log's last
lines) and the agent log's last lines."""

from __future__ import annotations

import json

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.grading.grading_summary import patch_state, verdict_line
from durable_rollouts.trajectory_view.markup import esc

LOG_TAIL_LINES = 40


def patch_section(result: RolloutResult | None) -> str:
    report = result.diff if result is not None else None
    if report is None:
        return "<p>No patch captured.</p>"
    notes = []
    if report.over_cap:
        notes.append(f"over the patch cap ({report.patch_bytes:,} bytes): not kept, graded 0")
    if report.omitted_count:
        omitted = ", ".join(f"{o.path} ({o.size_bytes:,} bytes)" for o in report.omitted)
        notes.append(f"{report.omitted_count} files left out: {omitted}")
    if report.note:
        notes.append(report.note)
    head = f"<p>{report.patch_bytes:,} bytes{'; ' + esc('; '.join(notes)) if notes else ''}</p>"
    if not report.kept_patch:
        return head + "<p>Empty patch.</p>"
    return head + f'<pre class="diff body">{"".join(_diff_line(line) for line in report.kept_patch.splitlines())}</pre>'


def _diff_line(line: str) -> str:
    kind = ""
    if line.startswith(("+++", "---", "diff --git")):
        kind = "file"
    elif line.startswith("+"):
        kind = "add"
    elif line.startswith("-"):
        kind = "del"
    elif line.startswith("@@"):
        kind = "hunk"
    return f'<span class="{kind}">{esc(line)}</span>\n' if kind else f"{esc(line)}\n"


def grading_section(result: RolloutResult | None) -> str:
    evaluation = result.evaluation if result is not None else None
    if evaluation is None:
        reason = (result.abort_reason or result.status) if result is not None else "not finished"
        return f"<p>Not graded ({esc(reason)}).</p>"
    rows: list[tuple[str, str]] = [
        ("grader", esc(evaluation.grader)),
        ("patch", esc(patch_state(evaluation))),
        ("tests", f"{evaluation.tests_passed} passed, {evaluation.tests_failed} failed"),
        (
            "reward",
            f"<b>{evaluation.reward:g}</b>"
            + (f" ({esc(json.dumps(evaluation.rewards))})" if evaluation.rewards else ""),
        ),
        ("solved", esc(evaluation.solved)),
        ("reset paths", esc(", ".join(evaluation.reset_paths) or "-")),
        ("pytest sessions", esc(evaluation.pytest_sessions)),
        ("verdict line", esc(verdict_line(evaluation.log_tail) or "-")),
    ]
    if evaluation.tampered:
        evidence = "".join(f"<li>{esc(line)}</li>" for line in evaluation.tampered)
        rows.append(("tampered", f'<span class="badge bad">reward 0</span><ul>{evidence}</ul>'))
    else:
        rows.append(("tampered", '<span class="badge ok">no evidence</span>'))
    if evaluation.probe is not None:
        rows.append(("impossible-task probe", esc(f"{evaluation.probe.verdict}: {evaluation.probe.note}")))
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f"<table>{table}</table><h3>Grading log, last lines</h3><pre "
        f'class="body">{esc(_tail(evaluation.log_tail or evaluation.log))}</pre>'
    )


def agent_log_section(result: RolloutResult | None) -> str:
    agent = result.agent if result is not None else None
    if agent is None:
        return "<p>No agent run recorded.</p>"
    facts = (
        f"<p>{esc(agent.reason)}; exit code {esc(agent.exit_code)}; {agent.turns} turns; {agent.duration_s:.1f} s</p>"
    )
    return facts + f'<pre class="body">{esc(_tail(agent.log or agent.log_tail))}</pre>'


def _tail(text: str) -> str:
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])
