"""Impossible-task probes made from every row kind: where the flip lands, that it is fixed by the seed, which
rows cannot be probes, and how a run picks its probe groups."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from durable_rollouts.contracts.tasks import HarborSpec, HarborTestFile, TaskSpec, f2p_eval_cmd, f2p_script
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import read_dataset
from durable_rollouts.task_sources.impossible_probes import (
    FLIP_RECORD,
    ProbeUnavailable,
    is_probe_slot,
    probe_for_slot,
    probe_of,
    probe_seed,
)

TASKS = PROJECT_ROOT / "examples" / "tasks"


def _local(command: str, record: Path, scratch: Path) -> str:
    """A boot's flip command with its record and script files moved into ``scratch``."""
    return command.replace(FLIP_RECORD, str(record)).replace("/tmp/rollout/probe_flip.py", str(scratch / "flip.py"))


@pytest.fixture(scope="module")
def rows() -> dict[str, TaskSpec]:
    found = {}
    for dataset in ("dataset.jsonl", "swe_rows.jsonl"):
        found |= {row.task.instance_id: row.task for row in read_dataset(TASKS / dataset, TASKS)}
    return found


def harbor_task() -> TaskSpec:
    tests = PROJECT_ROOT / "examples" / "harbor_tasks" / "temperature-reward-txt" / "tests"
    files = [
        HarborTestFile(path=path.name, data_b64=base64.b64encode(path.read_bytes()).decode())
        for path in sorted(tests.iterdir())
    ]
    return TaskSpec(
        instance_id="temperature", image="img", workdir="/app", problem_statement="p", harbor=HarborSpec(tests=files)
    )


def test_a_probe_is_its_row_under_a_new_id_without_a_reference_patch(rows):
    task = rows["calc-eval-cmd"]
    probe = probe_of(task, 42)
    assert probe.instance_id == "calc-eval-cmd.probe-42"
    assert probe.reference_patch is None
    assert probe.probe is not None and (probe.probe.source, probe.probe.seed) == ("calc-eval-cmd", 42)
    assert (probe.image, probe.workdir, probe.problem_statement, probe.eval_cmd) == (
        task.image,
        task.workdir,
        task.problem_statement,
        task.eval_cmd,
    )
    assert probe_of(task, 42) == probe
    with pytest.raises(ProbeUnavailable, match="a probe already"):
        probe_of(probe, 1)


def test_an_f2p_probe_flips_its_script(rows):
    task = rows["textutil-f2p"]
    probe = probe_of(task, 3)
    flip = probe.probe.flip
    before, after = f2p_script(task.eval_cmd).splitlines(), f2p_script(probe.eval_cmd).splitlines()
    assert [i + 1 for i, (old, new) in enumerate(zip(before, after, strict=True)) if old != new] == [flip.line]
    assert flip.flipped in after[flip.line - 1] and flip.path.endswith("rollout_f2p.py")


def test_a_swebench_probe_flips_an_added_line_of_a_fail_to_pass_test(rows):
    for instance in ("slugify-swebench", "rollouts-examples__wordfreq-12"):
        task = rows[instance]
        for seed in range(10):
            probe = probe_of(task, seed)
            flip = probe.probe.flip
            assert any(test.endswith(f"::{flip.test}") for test in task.swebench.fail_to_pass)
            changed = [
                (old, new)
                for old, new in zip(
                    task.swebench.test_patch.split("\n"), probe.swebench.test_patch.split("\n"), strict=True
                )
                if old != new
            ]
            assert len(changed) == 1 and changed[0][0].startswith("+") and flip.flipped in changed[0][1]
            assert changed[0][0].replace(flip.expected, flip.flipped, 1) == changed[0][1]


def test_the_swebench_probe_patch_applies_with_the_flip_at_its_line(rows, tmp_path):
    task = rows["slugify-swebench"]
    probe = probe_of(task, 5)
    repo = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(TASKS / "slugify-swebench" / "repo"), str(repo)], check=True)
    subprocess.run(["git", "apply"], input=probe.swebench.test_patch, text=True, cwd=repo, check=True)
    flip = probe.probe.flip
    assert flip.flipped in (repo / flip.path).read_text().splitlines()[flip.line - 1]


def test_a_harbor_probe_flips_a_python_test_module_and_keeps_the_others():
    task = harbor_task()
    probe = probe_of(task, 9)
    flip = probe.probe.flip
    assert flip.path == "tests/test_outputs.py"
    files = {test.path: base64.b64decode(test.data_b64).decode() for test in probe.harbor.tests}
    originals = {test.path: base64.b64decode(test.data_b64).decode() for test in task.harbor.tests}
    assert files["test.sh"] == originals["test.sh"]
    assert files["test_outputs.py"].splitlines()[flip.line - 1] == originals["test_outputs.py"].splitlines()[
        flip.line - 1
    ].replace(flip.expected, flip.flipped, 1)


def test_rows_whose_tests_live_in_the_image_flip_at_boot_before_the_baseline(rows):
    for instance in ("calc-eval-cmd", "inventory-swepro"):
        task = rows[instance]
        probe = probe_of(task, 7)
        assert probe.probe.flip is None
        assert probe.pre_commands[:-1] == task.pre_commands
        assert FLIP_RECORD in probe.pre_commands[-1]


@pytest.mark.parametrize("instance, expected_tests", [("inventory-swepro", "fail_to_pass"), ("calc-eval-cmd", None)])
def test_the_boot_command_flips_a_test_the_verdict_needs(rows, tmp_path, instance, expected_tests):
    """The pre-command run as the boot runs it (bash, in a checkout of the image's repository)."""
    task = rows[instance]
    for seed in range(6):
        repo, record = tmp_path / f"repo-{seed}", tmp_path / f"flip-{seed}.json"
        shutil.copytree(TASKS / instance / "repo", repo)
        done = subprocess.run(
            ["bash", "-c", _local(probe_of(task, seed).pre_commands[-1], record, tmp_path)],
            cwd=repo,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        flip = json.loads(record.read_text())
        if expected_tests:
            assert f"{flip['path']}::{flip['test']}" in getattr(task.swepro, expected_tests)
        else:
            assert flip["path"] in task.eval_cmd
        assert flip["flipped"] in (repo / flip["path"]).read_text().splitlines()[flip["line"] - 1]


def test_a_row_with_nothing_to_flip_is_unavailable_naming_where_its_tests_are(rows):
    with pytest.raises(ProbeUnavailable, match="swebench.test_patch") as caught:
        probe_of(rows["rollouts-examples__roman-7"], 1)
    assert caught.value.field == "swebench.test_patch"
    bare = rows["textutil-f2p"].model_copy(update={"eval_cmd": f2p_eval_cmd("def test_x():\n    assert True\n")})
    with pytest.raises(ProbeUnavailable, match="eval_cmd: the f2p script has no flippable expected value"):
        probe_of(bare, 1)


def test_probe_slots_are_fixed_per_run_and_group_and_come_at_the_share():
    assert [is_probe_slot("run", index, 0.25) for index in range(50)] == [
        is_probe_slot("run", index, 0.25) for index in range(50)
    ]
    share = sum(is_probe_slot("run-a", index, 0.1) for index in range(20000)) / 20000
    assert 0.09 < share < 0.11
    assert not any(is_probe_slot("run", index, 0.0) for index in range(1000))
    assert all(is_probe_slot("run", index, 1.0) for index in range(1000))
    assert probe_seed("run", 1) != probe_seed("run", 2) and probe_seed("run", 1) == probe_seed("run", 1)


def test_probe_for_slot_makes_the_slots_probe_with_the_slots_seed(rows):
    task = rows["calc-eval-cmd"]
    assert probe_for_slot(task, "run", 3, 0.0) is None
    assert probe_for_slot(task, "run", 3, 1.0) == probe_of(task, probe_seed("run", 3))


def test_the_pre_command_records_why_and_never_fails_the_boot_in_an_image_without_python3(rows, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("base64", "rm"):
        (tools / tool).symlink_to(shutil.which(tool))
    record = tmp_path / "flip.json"
    command = _local(probe_of(rows["calc-eval-cmd"], 1).pre_commands[-1], record, tmp_path)
    done = subprocess.run(
        ["/bin/bash", "-c", command], cwd=tmp_path, env={"PATH": str(tools)}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(record.read_text()) == {"error": "the flip script failed in this image (it needs python3 >= 3.8)"}
    assert not (tmp_path / "flip.py").exists()


def swebench_row(rows, test_patch: str, fail_to_pass: list[str]) -> TaskSpec:
    task = rows["slugify-swebench"]
    return task.model_copy(
        update={"swebench": task.swebench.model_copy(update={"test_patch": test_patch, "fail_to_pass": fail_to_pass})}
    )


PATCH = """diff --git a/tests/test_a.py b/tests/test_a.py
--- /dev/null
+++ b/tests/test_a.py
@@ -0,0 +1,13 @@
+class TestX:
+    def test_foo(self):
+        assert f() == 1
+
+
+class TestOther:
+    def test_foo(self):
+        assert f() == 2
+
+
+def test_doc():
+    code = \"\"\"
+    assert h() == 9
"""


def test_a_swebench_flip_lands_only_in_the_test_the_id_names_never_in_a_string(rows):
    for seed in range(12):
        flip = probe_of(swebench_row(rows, PATCH, ["tests/test_a.py::TestX::test_foo"]), seed).probe.flip
        assert (flip.test, flip.expected) == ("TestX::test_foo", "1")
    with pytest.raises(ProbeUnavailable):
        probe_of(swebench_row(rows, PATCH, ["tests/test_a.py::test_doc"]), 1)
    django = probe_of(swebench_row(rows, PATCH, ["test_foo (tests.test_a.TestOther)"]), 1).probe.flip
    assert (django.test, django.expected) == ("TestOther::test_foo", "2")


def test_a_swepro_row_naming_no_test_cannot_be_a_probe(rows):
    task = rows["inventory-swepro"]
    bare = task.model_copy(update={"swepro": task.swepro.model_copy(update={"fail_to_pass": [], "pass_to_pass": []})})
    with pytest.raises(ProbeUnavailable, match="swepro.fail_to_pass"):
        probe_of(bare, 1)


def test_an_eval_command_naming_node_ids_gets_its_flip_in_one_of_them(rows, tmp_path):
    task = rows["calc-eval-cmd"].model_copy(
        update={"eval_cmd": "python3 -m pytest -q tests/test_evaluator.py::test_precedence"}
    )
    for seed in range(4):
        repo, record = tmp_path / f"repo-{seed}", tmp_path / f"flip-{seed}.json"
        shutil.copytree(TASKS / "calc-eval-cmd" / "repo", repo)
        subprocess.run(
            ["bash", "-c", _local(probe_of(task, seed).pre_commands[-1], record, tmp_path)], cwd=repo, check=True
        )
        assert json.loads(record.read_text())["test"] == "test_precedence"
