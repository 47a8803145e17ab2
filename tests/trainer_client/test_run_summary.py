"""The starter's run summary (``durable_rollouts.trainer_client.run_summary``): a line per group, then one per
sample, and the hosts line of ``starter.py status``."""

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.rollout_group import ChildRun, GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import DiscardedRun, RolloutResult
from durable_rollouts.trainer_client.rollout_queries import HostSlots
from durable_rollouts.trainer_client.run_summary import agent_run_notes, hosts_line, summary_lines


def sample_of(workflow_id: str, index: int, reward: float, reason: str | None = None) -> GroupSample:
    status = "aborted" if reason else "completed"
    rollout = RolloutResult(
        workflow_id=workflow_id,
        instance_id="calc-1",
        sample_index=index,
        group_index=0,
        status=status,
        abort_reason=reason,
        reward=reward,
    )
    outcome = "infrastructure" if reason else "model"
    return GroupSample(
        sample_index=index,
        valid=not reason,
        outcome=outcome,
        invalid_reason=reason,
        rollout=rollout,
        runs=[ChildRun(workflow_id=workflow_id, status=status, abort_reason=reason, outcome=outcome)],
    )


def test_the_summary_has_a_line_per_group_then_one_per_sample(capsys):
    done = GroupResult(
        workflow_id="g0",
        prompt_key="calc-1",
        group_index=0,
        status="completed",
        samples=[sample_of("a", 0, 1.0), sample_of("b", 1, 0.0)],
        refill_budget=2,
        kept=True,
    )
    short = GroupResult(
        workflow_id="g1",
        prompt_key="calc-1",
        group_index=1,
        status="insufficient",
        note="1 of 2 valid",
        samples=[sample_of("c", 0, 1.0), sample_of("d", 1, 0.0, "sandbox_boot_failed")],
        refilled=2,
        refill_budget=2,
        dropped_by="min_valid",
    )
    print("\n".join(summary_lines([short, done])))
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "group 0 calc-1: completed  valid 2/2  refilled 0/2  kept"
    assert out[3].split()[:6] == ["calc-1", "0", "completed", "1.00", "True", "False"]
    assert out[5] == "group 1 calc-1: insufficient  valid 1/2  refilled 2/2  dropped_by min_valid  (1 of 2 valid)"
    assert out[7].split()[:5] == ["calc-1", "1", "aborted", "0.00", "False"] and out[7].endswith("sandbox_boot_failed")
    assert out[-1] == "groups 2: 1 completed, 1 insufficient, 1 dropped; samples valid 3/4, mean reward 0.667"


def test_a_sample_whose_patch_was_empty_says_so(capsys):
    sample = sample_of("e", 0, 0.0)
    assert sample.rollout is not None
    sample.rollout.evaluation = EvalResult(
        reward=0.0, solved=False, applied_cleanly=False, grader="eval_cmd", apply_method="empty"
    )
    group = GroupResult(
        workflow_id="g0",
        prompt_key="calc-1",
        group_index=0,
        status="completed",
        samples=[sample],
        refill_budget=0,
        kept=True,
    )
    print("\n".join(summary_lines([group])))
    line = capsys.readouterr().out.splitlines()[3]
    assert line.split()[:6] == ["calc-1", "0", "completed", "0.00", "True", "False"] and line.endswith("patch: empty")


def test_the_hosts_line_shows_slots_in_use_and_hosts_no_worker_polls_for():
    hosts = [HostSlots("rl-rollouts-host-a", 8, 3, 1), HostSlots("rl-rollouts-host-b", None, 2, 0)]
    assert (
        hosts_line(hosts, 1)
        == "hosts: rl-rollouts-host-a 3/8 slots, rl-rollouts-host-b 2/? slots (not polling); 1 booting (host not yet "
        "recorded)"
    )
    assert hosts_line([], 0) == "hosts: none; 0 booting (host not yet recorded)"


def test_interruptions_and_discarded_agent_runs_are_said_on_the_sample_line_and_in_the_totals(capsys):
    sample = sample_of("f", 0, 1.0)
    assert sample.rollout is not None
    sample.rollout.agent = AgentRun(
        session_id="s", exit_code=0, reason="success", is_error=False, turns=6, interruptions=5
    )
    sample.rollout.discarded = [
        DiscardedRun(
            attempt=1, turns=12, sampled_tokens=740, reason="the host did not come back within the resume window"
        )
    ]
    group = GroupResult(
        workflow_id="g0",
        prompt_key="calc-1",
        group_index=0,
        status="completed",
        samples=[sample],
        refill_budget=0,
        kept=True,
    )
    print("\n".join(summary_lines([group])))
    out = capsys.readouterr().out.splitlines()
    assert out[3].endswith(
        "interrupted 5x (resumed)  discarded run 1: 12 turns, 740 sampled tokens (the host did not come back within "
        "the resume window)"
    )
    assert out[-1].endswith("; agent runs discarded 1 (12 turns)")
    assert agent_run_notes(sample_of("g", 0, 1.0).rollout) == [], "nothing happened: nothing said"
