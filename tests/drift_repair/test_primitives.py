"""Each drift primitive: it applies (exact text), it breaks the script (run for real), the oracle diff restores it."""

from __future__ import annotations

import textwrap

import pytest

from durable_rollouts.contracts.drift_repair import DriftSpec
from durable_rollouts.drift_repair.baselines import baseline_drift, oracle_repair
from durable_rollouts.drift_repair.primitives import PRIMITIVES, DriftSpecError, apply_spec
from durable_rollouts.drift_repair.script_runner import LocalScriptRunner
from durable_rollouts.drift_repair.unified_diff import apply_diff

SCRIPT = textwrap.dedent(
    '''\
    """A script touching every primitive's kind of site."""
    import json  # serialisation
    import math
    from collections import Counter


    def describe(values: list, label: str, *, width: int) -> str:
        return f"{label.upper()}: {sorted(values)}".ljust(width)


    data = json.loads("[3, 1, 2, 3]")
    counts = Counter(data)
    print(describe(data, "values", width=22) + "|")
    print(json.dumps(counts, sort_keys=True))
    print(round(math.pi, 3), isinstance(data, list))
    '''
)
OUTPUT = 'VALUES: [1, 2, 3, 3]  |\n{"1": 1, "2": 1, "3": 2}\n3.142 True\n'

CASES = {
    "RenameApiCall": (
        {"old": "dumps", "new": "dump_string", "owner": "json"},
        [("print(json.dumps(counts, sort_keys=True))", "print(json.dump_string(counts, sort_keys=True))")],
        "AttributeError",
    ),
    "RenameKeywordArg": (
        {"function": "dumps", "old": "sort_keys", "new": "sorted_keys"},
        [("json.dumps(counts, sort_keys=True)", "json.dumps(counts, sorted_keys=True)")],
        "TypeError",
    ),
    "RemoveKeywordArg": (
        {"function": "describe", "name": "width"},
        [('describe(data, "values", width=22)', 'describe(data, "values")')],
        "TypeError",
    ),
    "MoveImportPath": (
        {"old_module": "collections", "new_module": "collections.compat"},
        [("from collections import Counter", "from collections.compat import Counter")],
        "ModuleNotFoundError",
    ),
    "ReorderPositionalArgs": (
        {"function": "describe", "order": [1, 0]},
        [('describe(data, "values", width=22)', 'describe("values", data, width=22)')],
        "AttributeError",
    ),
    "ChangeAttributeAccess": (
        {"old": "pi", "new": "PI", "owner": "math"},
        [("round(math.pi, 3)", "round(math.PI, 3)")],
        "AttributeError",
    ),
}


def run(script: str):
    (outcome,) = LocalScriptRunner().run_many([(script, "")], timeout_s=10)
    return outcome


def test_the_fixture_script_runs():
    outcome = run(SCRIPT)
    assert outcome.ran and outcome.stdout == OUTPUT and not outcome.stderr


def test_every_primitive_has_a_case():
    assert set(CASES) == set(PRIMITIVES) and len(PRIMITIVES) >= 5


@pytest.mark.parametrize("name", sorted(CASES))
def test_primitive_applies_breaks_and_the_oracle_diff_restores_it(name):
    params, replacements, error = CASES[name]
    breakage = apply_spec(SCRIPT, DriftSpec(primitive_type=name, params=params))
    expected = SCRIPT
    for old, new in replacements:
        expected = expected.replace(old, new)
    assert breakage.script == expected and breakage.sites == len(replacements)
    assert "# serialisation" in breakage.script

    broken = run(breakage.script)
    assert broken.exit_code == 1 and not broken.ran
    assert broken.stderr.startswith("Traceback") and error in broken.stderr.splitlines()[-1]

    restored = apply_diff(breakage.script, oracle_repair(breakage.script, SCRIPT))
    assert restored == SCRIPT
    assert run(restored).stdout == OUTPUT


def test_import_renames_keep_the_bound_name():
    spec = DriftSpec(primitive_type="MoveImportPath", params={"old_module": "json", "new_module": "json_legacy"})
    assert "import json_legacy as json  # serialisation" in apply_spec(SCRIPT, spec).script
    aliased = "import numpy_like as np\nnp.x\n"
    spec = DriftSpec(primitive_type="MoveImportPath", params={"old_module": "numpy_like", "new_module": "numpy_next"})
    assert apply_spec(aliased, spec).script == "import numpy_next as np\nnp.x\n"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("f(a, key=1)", "f(a)"),
        ("f(key=1, other=2)", "f(other=2)"),
        ("f(key=1)", "f()"),
        ("f(\n    a,\n    key=1,\n)", "f(\n    a,\n)"),
    ],
)
def test_removing_a_keyword_takes_its_comma(call, expected):
    spec = DriftSpec(primitive_type="RemoveKeywordArg", params={"function": "f", "name": "key"})
    assert apply_spec(call + "\n", spec).script == expected + "\n"


def test_reorder_rewrites_every_matching_call_and_leaves_others():
    script = "g(a, b)\ng(c, d)\ng(x)\nh(a, b)\n"
    spec = DriftSpec(primitive_type="ReorderPositionalArgs", params={"function": "g", "order": [1, 0]})
    assert apply_spec(script, spec).script == "g(b, a)\ng(d, c)\ng(x)\nh(a, b)\n"


def test_attribute_change_skips_calls_and_assignments():
    script = "self.size = 1\nprint(self.size, self.size())\n"
    spec = DriftSpec(primitive_type="ChangeAttributeAccess", params={"old": "size", "new": "length"})
    assert apply_spec(script, spec).script == "self.size = 1\nprint(self.length, self.size())\n"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (DriftSpec(primitive_type="DeleteEverything"), "unknown primitive"),
        (DriftSpec(primitive_type="RenameApiCall", params={"old": "dumps"}), "new: Field required"),
        (DriftSpec(primitive_type="RenameApiCall", params={"old": "dumps", "new": "class"}), "not a Python identifier"),
        (DriftSpec(primitive_type="RenameApiCall", params={"old": "dumps", "new": "dumps"}), "must differ"),
        (DriftSpec(primitive_type="ReorderPositionalArgs", params={"function": "f", "order": [0, 1]}), "identity"),
        (DriftSpec(primitive_type="RenameApiCall", params={"old": "nothing_here", "new": "x"}), "matches nothing"),
        (DriftSpec(primitive_type="RenameApiCall", params={"old": "x", "new": "y", "unknown": 1}), "Extra inputs"),
    ],
)
def test_unusable_specs_say_why(spec, message):
    with pytest.raises(DriftSpecError, match=message):
        apply_spec(SCRIPT, spec)


def test_a_script_that_does_not_parse_is_a_spec_error():
    with pytest.raises(DriftSpecError, match="does not parse"):
        apply_spec("def f(:\n", DriftSpec(primitive_type="RenameApiCall", params={"old": "f", "new": "g"}))


def test_the_baseline_is_seeded_and_prefers_the_target_category():
    assert baseline_drift(SCRIPT, 7) == baseline_drift(SCRIPT, 7)
    assert len({baseline_drift(SCRIPT, seed).model_dump_json() for seed in range(20)}) > 5
    for primitive in PRIMITIVES.values():
        chosen = baseline_drift(SCRIPT, 3, primitive.category)
        assert PRIMITIVES[chosen.primitive_type].category == primitive.category
        assert apply_spec(SCRIPT, chosen).script != SCRIPT


def test_the_baseline_never_picks_code_that_may_not_run():
    script = "import sys\nif len(sys.argv) > 5:\n    print(sys.version)\nprint(sum([1, 2]))\n"
    specs = {baseline_drift(script, seed).model_dump_json() for seed in range(50)}
    assert all("version" not in spec for spec in specs)
