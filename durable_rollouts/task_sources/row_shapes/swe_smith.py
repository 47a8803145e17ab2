"""SWE-smith rows (``SWE-bench/SWE-smith``): a synthetic bug in a repo whose image holds the clean tree.

SWE-smith's harness checks out the instance's branch, where ``patch``, the bug, is committed. Offline, a
pre-command applies ``patch`` itself at boot and folds it into the repo's only history (the HEAD commit amended,
every other ref and the reflog dropped, unreachable objects pruned), so neither ``git diff`` nor ``git log`` nor
a remote ref shows the fix, and the baseline recorded after it makes the agent's diff exactly the agent's. The
gold fix for the scripted oracle is ``patch`` reversed. Grading runs the repo profile's pytest command on the
files of the ``FAIL_TO_PASS`` tests, and ``swe_smith_verdict`` reads the log; docs/task_sources.md
(*SWE-rebench, SWE-Gym and SWE-smith rows*) gives the image names and the command.

Invariant: solved iff each test of ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` in those files is reported passed, which
is stricter than the harness (a test missing from the log fails); only pytest profiles are read, so a row whose
tests are not pytest node ids is refused.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durable_rollouts.task_sources.row_shapes.fields import ShapeProblem, present, test_list, text
from durable_rollouts.task_sources.row_shapes.reverse_patch import reverse_patch
from durable_rollouts.task_sources.row_shapes.swe_smith_verdict import END, START
from durable_rollouts.task_sources.row_shapes.swebench_family import SWEBENCH_WORKDIR

NAME = "SWE-smith"
NEEDS = ("instance_id", "image_name", "patch", "FAIL_TO_PASS", "PASS_TO_PASS")
IMAGE_NAMESPACE = "swebench"
MIRROR = re.compile(r"^swesmith/([^/_][^/]*?)__([^/]+)\.([0-9a-f]{8})$")
DEFAULT_TEST_COMMAND = "pytest --disable-warnings --color=no --tb=no --verbose"
# mirror name (owner__repo.commit8) -> the profile's own test command, where it is not the Python default.
TEST_COMMANDS = {
    "tkrajina__gpxpy.09fc46b3": "pytest test.py --verbose --color=no --tb=no --disable-warnings",
    "mido__mido.a0158ff9": "pytest --disable-warnings --color=no --tb=no --verbose -rs -c /dev/null",
    "paramiko__paramiko.23f92003": "pytest -rA --color=no --disable-warnings",
    "jax-ml__jax.ebd90e06": "pytest --disable-warnings --color=no --tb=no --verbose -n auto",
}
TEST_LOG = "/tmp/swesmith_tests.log"
REQUIRED_FILE = "/tmp/swesmith_required.json"
VERDICT_FILE = "/tmp/swesmith_verdict.py"
BUG_FILE = "/tmp/swesmith_bug.diff"
VERDICT = Path(__file__).with_name("swe_smith_verdict.py")


def claims(fields: Mapping[str, Any]) -> bool:
    return "image_name" in fields or MIRROR.match(str(fields.get("repo", ""))) is not None


def missing(fields: Mapping[str, Any]) -> list[str]:
    """The needed fields the row lacks; a mirror ``repo`` stands in for ``image_name``."""
    mirror = MIRROR.match(str(fields.get("repo", "")))
    return [key for key in NEEDS if fields.get(key) is None and not (key == "image_name" and mirror)]


def mirror_name(fields: Mapping[str, Any]) -> str:
    """``owner__repo.commit8``: the row's mirror, or the instance id without its bug suffix."""
    if match := MIRROR.match(str(fields.get("repo", ""))):
        return f"{match.group(1)}__{match.group(2)}.{match.group(3)}"
    return text(fields, "instance_id").rsplit(".", 1)[0]


def image(fields: Mapping[str, Any]) -> str:
    if present(fields, "image_name"):
        return text(fields, "image_name")
    match = MIRROR.match(text(fields, "repo"))
    assert match is not None  # missing() let the row through only with a mirror repo
    owner, repo, commit = match.groups()
    return f"{IMAGE_NAMESPACE}/swesmith.x86_64.{owner}_1776_{repo}.{commit}".lower()


def test_files(fail_to_pass: list[str]) -> list[str]:
    for name in fail_to_pass:
        if "::" not in name:
            raise ShapeProblem(
                "FAIL_TO_PASS",
                f"{name!r} is not a pytest node id (path::name): only SWE-smith's pytest profiles are read",
            )
    return sorted({name.split("::", 1)[0] for name in fail_to_pass})


def bug_command(patch: str) -> str:
    """Apply the bug and make it the repo's only history (SWE-smith's ``git apply`` ladder, then the fold)."""
    encoded = base64.b64encode(patch.encode()).decode()
    return "\n".join(
        [
            f"echo {encoded} | base64 -d > {BUG_FILE}",
            f"git apply --verbose {BUG_FILE} || git apply --verbose --reject {BUG_FILE} || patch --batch --fuzz=5 -p1 "
            f"-i {BUG_FILE}",
            f"rm -f {BUG_FILE}",
            "git add -A",
            "git -c user.name=swesmith -c user.email=swesmith@localhost commit -q --amend --no-edit --allow-empty",
            "branch=$(git symbolic-ref -q HEAD || true)",
            'git for-each-ref --format=\'%(refname)\' | while read -r ref; do [ "$ref" = "$branch" ] || git update-ref '
            '-d "$ref"; done',
            "git reflog expire --expire=now --all",
            "git gc -q --prune=now",
        ]
    )


def eval_command(test_command: str, files: list[str], fail_to_pass: list[str], pass_to_pass: list[str]) -> str:
    """The harness's eval script, then the verdict on its log (the grader's exit code: 0 iff solved)."""
    required = json.dumps({"FAIL_TO_PASS": fail_to_pass, "PASS_TO_PASS": pass_to_pass, "files": files})
    encoded = base64.b64encode(required.encode()).decode()
    verdict = base64.b64encode(VERDICT.read_bytes()).decode()
    return "\n".join(
        [
            "source /opt/miniconda3/bin/activate",
            "conda activate testbed",
            f"cd {SWEBENCH_WORKDIR}",
            "{",
            f"  echo \"+ : '{START}'\"",
            f"  {test_command} {' '.join(shlex.quote(f) for f in files)}",
            f"  echo \"+ : '{END}'\"",
            f"}} 2>&1 | tee {TEST_LOG}",
            f"echo {encoded} | base64 -d > {REQUIRED_FILE}",
            f"echo {verdict} | base64 -d > {VERDICT_FILE}",
            f"python3 {VERDICT_FILE} {TEST_LOG} {REQUIRED_FILE}",
        ]
    )


def task(fields: Mapping[str, Any]) -> dict[str, Any]:
    patch = text(fields, "patch")
    fail_to_pass = test_list(fields, "FAIL_TO_PASS", required=True)
    pass_to_pass = test_list(fields, "PASS_TO_PASS", required=False)
    files = test_files(fail_to_pass)
    statement = fields.get("problem_statement")
    return {
        "instance_id": text(fields, "instance_id"),
        "image": image(fields),
        "workdir": SWEBENCH_WORKDIR,
        "problem_statement": statement if isinstance(statement, str) and statement else None,
        "eval_cmd": eval_command(
            TEST_COMMANDS.get(mirror_name(fields), DEFAULT_TEST_COMMAND), files, fail_to_pass, pass_to_pass
        ),
        "pre_commands": [bug_command(patch)],
        "reference_patch": reverse_patch(patch),
    }
