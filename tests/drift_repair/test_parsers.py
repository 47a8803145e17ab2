"""The role answer parsers (JSON spec, diff extraction), unified diffs, prompts and the scripted role players."""

from __future__ import annotations

import pytest

from durable_rollouts.contracts.drift_repair import DriftSpec
from durable_rollouts.drift_repair.baselines import oracle_repair
from durable_rollouts.drift_repair.corpus import load_corpus
from durable_rollouts.drift_repair.parsers import SpecParseError, extract_diff, parse_drift_spec
from durable_rollouts.drift_repair.primitives import apply_spec
from durable_rollouts.drift_repair.prompts import (
    DRIFT_SYSTEM,
    REPAIR_SYSTEM,
    drift_prompt,
    prompt_role,
    prompt_script,
    prompt_task_id,
    repair_prompt,
)
from durable_rollouts.drift_repair.unified_diff import DiffError, apply_diff, make_diff, parse_diff
from durable_rollouts.scripted_policy.drift_roles import RepairCompletion, SelfPlayCompletion, drift_completion

SPEC = {"primitive_type": "RenameApiCall", "params": {"old": "dumps", "new": "dump_s"}}
ORIGINAL = "import json\n\nx = 1\nprint(json.dumps(x))\nprint('done')\n"
BROKEN = "import json\n\nx = 1\nprint(json.dump_s(x))\nprint('done')\n"


@pytest.mark.parametrize(
    "text",
    [
        '{"primitive_type": "RenameApiCall", "params": {"old": "dumps", "new": "dump_s"}}',
        'I will rename it.\n```json\n{"primitive_type": "RenameApiCall",\n "params": {"old": "dumps", "new": '
        '"dump_s"}}\n```\nDone.',
        '```\n{"primitive_type": "RenameApiCall", "params": {"old": "dumps", "new": "dump_s"}}\n```',
        'Options: {"note": "not this"} then {"primitive_type": "RenameApiCall", "params": {"old": "dumps", "new": '
        '"dump_s"}} ok',
        '```json\n{"primitive_type": "RenameApiCall", "params": {"old": "dumps", "new": "dump_s"}}',
    ],
)
def test_the_spec_parser_tolerates_fences_and_prose(text):
    assert parse_drift_spec(text) == DriftSpec(**SPEC)


def test_params_default_to_empty():
    assert parse_drift_spec('{"primitive_type": "X"}') == DriftSpec(primitive_type="X", params={})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I refuse.", "no JSON object"),
        ('{"primitive_type": "RenameApiCall", "params": {"old": "dumps",', "no JSON object"),
        ('{"primitive": "RenameApiCall"}', "no JSON object with a string primitive_type"),
        ('{"primitive_type": "RenameApiCall", "params": ["old"]}', "spec:"),
    ],
)
def test_malformed_specs_raise_with_a_reason(text, reason):
    with pytest.raises(SpecParseError, match=reason):
        parse_drift_spec(text)


def test_diff_round_trips_and_the_empty_diff_changes_nothing():
    diff = make_diff(BROKEN, ORIGINAL)
    assert diff.startswith("--- a/script.py\n+++ b/script.py\n@@ -1,5 +1,5 @@")
    assert apply_diff(BROKEN, diff) == ORIGINAL
    assert make_diff(ORIGINAL, ORIGINAL) == "" and apply_diff(BROKEN, "") == BROKEN


def test_missing_final_newlines_round_trip():
    for before, after in [("a\nb", "a\nc"), ("a\nb\n", "a\nc"), ("a\nb", "a\nc\n")]:
        assert apply_diff(before, make_diff(before, after)) == after


def test_extraction_drops_prose_around_the_diff():
    diff = make_diff(BROKEN, ORIGINAL)
    answer = f"The call was renamed.\n\n```diff\n{diff}```\n\nThis restores `json.dumps`."
    assert extract_diff(answer) == diff
    unfenced = f"Here you go:\n{diff}\nThat should fix it."
    assert apply_diff(BROKEN, extract_diff(unfenced)) == ORIGINAL
    assert extract_diff("No diff from me.") == ""


def test_models_dropping_the_blank_context_space_and_miscounting_offsets_still_apply():
    sloppy = (
        "--- script.py\n+++ script.py\n@@ -10,5 +10,5 @@\n import json\n\n x = "
        "1\n-print(json.dump_s(x))\n+print(json.dumps(x))\n"
    )
    assert apply_diff(BROKEN, sloppy) == ORIGINAL


def test_a_bare_hunk_header_reads_until_the_diff_ends():
    bare = "@@ @@\n-print(json.dump_s(x))\n+print(json.dumps(x))\nthanks!\n"
    assert apply_diff(BROKEN, bare) == ORIGINAL


@pytest.mark.parametrize(
    ("diff", "reason"),
    [
        ("@@ -1,1 +1,1 @@\n-print(nothing)\n+print(something)\n", "does not match"),
        (
            "--- a/one.py\n+++ b/one.py\n@@ -1 +1 @@\n-x\n+y\n--- a/two.py\n+++ b/two.py\n@@ -1 +1 @@\n-x\n+y\n",
            "more than one file",
        ),
        ("@@ -1,1 +1,1 @@\n", "empty hunk"),
        ("@@ nonsense\n-x\n", "malformed hunk header"),
    ],
)
def test_diffs_that_do_not_apply_raise(diff, reason):
    with pytest.raises(DiffError, match=reason):
        apply_diff(BROKEN, diff)


def test_hunks_apply_in_order_and_never_overlap():
    source = "a\nb\na\nb\n"
    diff = "@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -1,2 +1,2 @@\n a\n-b\n+C\n"
    assert apply_diff(source, diff) == "a\nB\na\nC\n"
    assert len(parse_diff(diff)) == 2


def test_prompts_carry_what_each_role_may_see_and_can_be_read_back():
    task = load_corpus()["word_count"]
    drift = drift_prompt(task)
    assert prompt_task_id(drift) == "word_count" and prompt_script(drift) == task.script
    assert f"Target drift category: {task.category}" in drift
    assert not any(case.stdin in drift for case in task.held_out)
    broken = apply_spec(
        task.script, DriftSpec(primitive_type="RenameApiCall", params={"old": "split", "new": "split_v2"})
    ).script
    repair = repair_prompt(task, broken, "Traceback ...\nAttributeError: 'str' object has no attribute 'split_v2'")
    assert prompt_script(repair) == broken and "AttributeError" in repair
    assert prompt_role(DRIFT_SYSTEM + drift) == "drift" and prompt_role(REPAIR_SYSTEM + repair) == "repair"
    assert all(name in DRIFT_SYSTEM for name in ("RenameApiCall", "MoveImportPath", "ReorderPositionalArgs"))


def test_scripted_roles_answer_from_the_prompt_alone():
    corpus = load_corpus()
    task = corpus["csv_totals"]
    drift_answer = drift_completion(DRIFT_SYSTEM + "\n" + drift_prompt(task), 4096)
    spec = parse_drift_spec(drift_answer.split("</think>")[1])
    broken = apply_spec(task.script, spec).script
    repair_answer = RepairCompletion(lambda: corpus)(
        REPAIR_SYSTEM + "\n" + repair_prompt(task, broken, "Traceback"), 4096
    )
    assert extract_diff(repair_answer) == oracle_repair(broken, task.script)
    self_play = SelfPlayCompletion(lambda: corpus)
    assert self_play(DRIFT_SYSTEM + "\n" + drift_prompt(task), 4096) == drift_answer
    assert self_play(REPAIR_SYSTEM + "\n" + repair_prompt(task, broken, "Traceback"), 4096) == repair_answer
    assert "cannot" in RepairCompletion(lambda: corpus)("Task: nope\n```python\nx\n```", 64)
