"""The agent's log as it travels in the result: cut with whole lines and a line saying what was kept."""

import json

from durable_rollouts.claude_code.agent_log import cut_log


def test_an_agent_log_over_the_limit_keeps_whole_lines_of_its_head_and_end_with_a_line_saying_so():
    lines = [json.dumps({"type": "assistant", "n": n}).encode() + b"\n" for n in range(400)]
    lines[-1] = json.dumps({"type": "result", "num_turns": 399}).encode() + b"\n"
    log = b"".join(lines)
    limit = 4000
    kept = cut_log(log[: limit + 1], log[-1000:], limit)
    events = [json.loads(line) for line in kept.splitlines()]
    cut = next(event for event in events if event["type"] == "rollout_log_cut")
    assert events[0] == {"type": "assistant", "n": 0} and events[-1] == {"type": "result", "num_turns": 399}
    assert kept.startswith(log[: cut["kept_head_bytes"]]) and kept.endswith(log[-cut["kept_end_bytes"] :])
    assert cut["kept_head_bytes"] + cut["kept_end_bytes"] <= limit
