import re

import pytest

from durable_rollouts.scripted_policy.completions import ASSISTANT_TURN, EXPLORE_COMMANDS, OraclePolicy, OracleTask

TASK = OracleTask(match="slugify drops digits", patch="--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
SYSTEM = "<|im_start|>system\nPrimary working directory: /repo\n<|im_end|>\n"


def prompt_after(turns: int) -> str:
    """A prompt whose problem statement the oracle knows, with ``turns`` assistant turns before the open one."""
    done = "".join(
        f"{ASSISTANT_TURN}\nturn {i}<|im_end|>\n<|im_start|>user\nslugify drops digits<|im_end|>\n"
        for i in range(turns)
    )
    return f"{SYSTEM}{done}{ASSISTANT_TURN}\n"


def bash_command(completion: str) -> str | None:
    found = re.search(r"<parameter=command>\n(.*?)\n</parameter>", completion, re.S)
    return found.group(1) if found else None


def test_without_exploring_the_oracle_reads_patches_and_finishes_in_three_turns():
    oracle = OraclePolicy([TASK])
    assert "<function=Read>" in oracle(prompt_after(0), 100)
    assert "git apply" in bash_command(oracle(prompt_after(1), 100))
    assert "<tool_call>" not in oracle(prompt_after(2), 100)


def test_an_exploring_oracle_runs_read_only_commands_in_the_workdir_before_the_same_patch():
    oracle = OraclePolicy([TASK], explore_turns=41)
    commands = [bash_command(oracle(prompt_after(turn), 100)) for turn in range(1, 42)]
    assert commands == [f"cd /repo && {EXPLORE_COMMANDS[i % len(EXPLORE_COMMANDS)]}" for i in range(41)]
    assert bash_command(oracle(prompt_after(42), 100)) == bash_command(OraclePolicy([TASK])(prompt_after(1), 100))
    assert "<tool_call>" not in oracle(prompt_after(43), 100)


def test_a_negative_number_of_exploring_turns_is_refused_by_name():
    with pytest.raises(ValueError, match="explore_turns"):
        OraclePolicy([TASK], explore_turns=-1)
