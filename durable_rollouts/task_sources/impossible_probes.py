"""Impossible-task probes (as ImpossibleBench makes them): a row whose tests contradict its problem statement,
made from any row by flipping one expected value (``probe_flip``), so that any pass is cheating.

docs/grading.md (*Impossible-task probes*) gives where each kind of row gets its flip. Where the row carries its
tests as text (an f2p script, a SWE-bench ``test_patch``, a Harbor task's Python tests) the flip is made here and
recorded in ``ImpossibleProbe.flip``; where they live in the image (``eval_cmd``, ``swepro`` rows) a pre-command
runs ``probe_flip`` at boot in both the agent's and the grading sandbox, before the baseline is recorded.
A row with no value to flip is ``ProbeUnavailable``, naming the field that holds its tests.

Invariants:

* ``probe_of(task, seed)`` is a pure function of its arguments (instance id ``<source>.probe-<seed>``, no
  reference patch, ``TaskSpec.probe`` set), and the flipped test is always one the grader puts back, so an
  agent's edit of it never counts.
* ``is_probe_slot(run_id, group_index, share)`` is deterministic (a restarted trainer picks the same groups, so
  workflow ids stay fixed) and, over many groups, picks ``share`` of them.
"""

from __future__ import annotations

import ast
import base64
import functools
import hashlib
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from durable_rollouts.contracts.probes import ImpossibleProbe, ProbeFlip
from durable_rollouts.contracts.tasks import (
    DEFAULT_TEST_FILES,
    F2P_SCRIPT_PATH,
    HarborTestFile,
    TaskSpec,
    f2p_eval_cmd,
    f2p_script,
)
from durable_rollouts.docker_sandbox.git_workspace import harness_file
from durable_rollouts.task_sources import probe_flip

PROBE_SUFFIX = ".probe-"
# Where the boot's flip of tests that live in the image writes what it flipped (read by the grader after boot).
FLIP_RECORD = harness_file("probe-flip.json")
_FLIP_SCRIPT = harness_file("probe_flip.py")
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(test\w*)\s*\(")
_CLASS = re.compile(r"^(\s*)class\s+(\w+)")
_ENDS_BODY = re.compile(r"\s*(?:return\b|raise\b|(?:\w+\.)*(?:skip|skipTest|xfail|exit|importorskip)\()")
# A pytest node id an eval command names (``tests/test_x.py::test_y``, ``tests/test_x.py::TestC::test_y``).
_NODE_ID = re.compile(r"[\w./-]+\.py::[\w:\[\]-]+")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class ProbeUnavailable(ValueError):
    """The row has no expected value a probe could flip; ``field`` names where its tests are."""

    def __init__(self, instance_id: str, field: str, why: str):
        super().__init__(f"task {instance_id}: {field}: {why}")
        self.field = field


def is_probe_slot(run_id: str, group_index: int, share: float) -> bool:
    """Whether group ``group_index`` of run ``run_id`` is a probe, when ``share`` of the groups are."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(f"{run_id}/{group_index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


def probe_seed(run_id: str, group_index: int) -> int:
    """The flip's seed for a run's group: fixed per group, different between groups."""
    return int.from_bytes(hashlib.blake2b(f"probe/{run_id}/{group_index}".encode(), digest_size=4).digest(), "big")


def probe_for_slot(task: TaskSpec, run_id: str, group_index: int, share: float) -> TaskSpec | None:
    """The probe run ``run_id`` makes of group ``group_index``'s row when that group is a probe slot (None when
    it is not); ``ProbeUnavailable`` when the row has nothing to flip."""
    if not is_probe_slot(run_id, group_index, share):
        return None
    return probe_of(task, probe_seed(run_id, group_index))


def probe_of(task: TaskSpec, seed: int) -> TaskSpec:
    """The impossible-task probe made from ``task`` with ``seed`` (module invariants)."""
    if task.probe is not None:
        raise ProbeUnavailable(task.instance_id, "probe", "the row is a probe already")
    grader = task.grader
    fields: dict[str, object]
    if grader == "harbor":
        fields, flip = _harbor_probe(task, seed)
    elif grader == "eval_cmd" and (script := f2p_script(task.eval_cmd or "")) is not None:
        fields, flip = _f2p_probe(task, script, seed)
    elif grader == "swebench":
        fields, flip = _swebench_probe(task, seed)
    elif grader == "swepro" and not (task.swepro and (task.swepro.fail_to_pass or task.swepro.pass_to_pass)):
        raise ProbeUnavailable(task.instance_id, "swepro.fail_to_pass", "the row names no test its verdict needs")
    elif grader in ("eval_cmd", "swepro"):
        fields, flip = {"pre_commands": [*task.pre_commands, _image_flip_command(task, seed)]}, None
    else:
        raise ProbeUnavailable(task.instance_id, "grader", "the row has no grader")
    probe = ImpossibleProbe(source=task.instance_id, seed=seed, flip=flip)
    return task.model_copy(
        update={
            **fields,
            "instance_id": f"{task.instance_id}{PROBE_SUFFIX}{seed}",
            "reference_patch": None,
            "probe": probe,
        }
    )


def _as_flip(flip: probe_flip.Flip) -> ProbeFlip:
    return ProbeFlip(path=flip.path, test=flip.test, line=flip.line, expected=flip.expected, flipped=flip.flipped)


def _f2p_probe(task: TaskSpec, script: str, seed: int) -> tuple[dict[str, object], ProbeFlip]:
    outcome = probe_flip.flip_one([(F2P_SCRIPT_PATH, script)], seed)
    if outcome is None:
        raise ProbeUnavailable(task.instance_id, "eval_cmd", "the f2p script has no flippable expected value")
    flip, text = outcome
    return {"eval_cmd": f2p_eval_cmd(text)}, _as_flip(flip)


def _is_test_module(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test") or name.endswith("_test.py"))


def _harbor_probe(task: TaskSpec, seed: int) -> tuple[dict[str, object], ProbeFlip]:
    harbor = task.harbor
    assert harbor is not None
    sources = [
        (f"tests/{test.path}", base64.b64decode(test.data_b64).decode("utf-8", errors="replace"))
        for test in harbor.tests
        if _is_test_module(test.path)
    ]
    outcome = probe_flip.flip_one(sources, seed)
    if outcome is None:
        raise ProbeUnavailable(task.instance_id, "harbor.tests", "no Python test module has a flippable expected value")
    flip, text = outcome
    tests = [
        HarborTestFile(path=test.path, data_b64=base64.b64encode(text.encode()).decode(), mode=test.mode)
        if f"tests/{test.path}" == flip.path
        else test
        for test in harbor.tests
    ]
    return {"harbor": harbor.model_copy(update={"tests": tests})}, _as_flip(flip)


def _image_flip_args(task: TaskSpec, seed: int) -> list[str]:
    """``probe_flip.main``'s arguments for a row whose tests live in the image."""
    args = ["--seed", str(seed), "--record", FLIP_RECORD]
    spec = task.swepro
    patterns = [*(task.test_files or DEFAULT_TEST_FILES), *(spec.selected_test_files if spec else [])]
    args += [part for pattern in patterns for part in ("--pattern", pattern)]
    if spec is not None:
        args += [part for test in spec.fail_to_pass for part in ("--test", test)]
        args += [part for test in spec.pass_to_pass for part in ("--fallback-test", test)]
    else:
        args += ["--prefer", task.eval_cmd or ""]
        args += [part for test in _NODE_ID.findall(task.eval_cmd or "") for part in ("--test", test)]
    return args


@functools.cache
def _flip_script_b64() -> str:
    """``probe_flip``'s source, base64-encoded for a pre-command (read once per process)."""
    return base64.b64encode(Path(probe_flip.__file__).read_bytes()).decode()


def _image_flip_command(task: TaskSpec, seed: int) -> str:
    """The pre-command flipping tests that live in the image (``probe_flip.main``); it never fails the boot."""
    script = _flip_script_b64()
    args = _image_flip_args(task, seed)
    failed = shlex.quote('{"error": "the flip script failed in this image (it needs python3 >= 3.8)"}')
    return (
        f"{{ echo {script} | base64 -d > {_FLIP_SCRIPT} && python3 {_FLIP_SCRIPT} {shlex.join(args)}; }} || echo "
        f"{failed} > {FLIP_RECORD}; rm -f {_FLIP_SCRIPT}"
    )


@dataclass(frozen=True)
class _PatchLine:
    path: str
    index: int
    new_line: int
    text: str


def _test_name_of(context: list[str], indent: int) -> str | None:
    """The test an added line of ``indent`` belongs to, from the hunk lines above it (nearest first): the line
    must be a top-level statement of a ``test*`` function's body, with no skip decorator on it."""
    for row, line in enumerate(context):
        if not line.strip():
            continue
        current = len(line) - len(line.lstrip())
        match = _DEF.match(line)
        if match and current < indent:
            if any("skip" in above or "xfail" in above for above in _decorators(context[row + 1 :])):
                return None
            cls = next(
                (
                    m.group(2)
                    for above in context[row + 1 :]
                    if (m := _CLASS.match(above)) and len(m.group(1)) < current
                ),
                None,
            )
            return f"{cls}::{match.group(2)}" if cls and current > 0 else match.group(2)
        if current < indent or _ENDS_BODY.match(line):
            return None
    return None


def _decorators(above: list[str]) -> Iterator[str]:
    for line in above:
        if not line.lstrip().startswith("@"):
            return
        yield line


def _added_lines(patch: str) -> Iterator[tuple[_PatchLine, list[str]]]:
    """Each added line of a unified diff, with the hunk's kept and added lines above it (nearest first)."""
    path, new_line = "", 0
    context: list[str] = []
    for index, line in enumerate(patch.split("\n")):
        if line.startswith("+++ "):
            path, context = line[4:].removeprefix("b/").strip(), []
        elif (hunk := _HUNK.match(line)) is not None:
            new_line, context = int(hunk.group(1)), []
        elif line.startswith(("diff --git", "--- ")):
            context = []
        elif line.startswith("+") and path:
            yield _PatchLine(path, index, new_line, line[1:]), context
            context, new_line = [line[1:], *context], new_line + 1
        elif line.startswith(" ") and path:
            context, new_line = [line[1:], *context], new_line + 1


def _in_string(context: list[str]) -> bool:
    """Whether a line sits inside a triple-quoted string opened by the hunk lines above it."""
    text = "\n".join(reversed(context))
    return (text.count('"""') + text.count("'''")) % 2 == 1


def _patch_candidates(patch: str) -> list[tuple[_PatchLine, str, ast.Constant]]:
    found = []
    for line, context in _added_lines(patch):
        if not _is_test_module(line.path) or _in_string(context):
            continue
        stripped = line.text.lstrip()
        try:
            statements = ast.parse(stripped).body
        except (SyntaxError, ValueError):
            continue
        literal = probe_flip.equality_literal(statements[0]) if len(statements) == 1 else None
        test = _test_name_of(context, len(line.text) - len(stripped)) if literal is not None else None
        if literal is not None and test is not None:
            found.append((line, test, literal))
    return found


def _swebench_probe(task: TaskSpec, seed: int) -> tuple[dict[str, object], ProbeFlip]:
    spec = task.swebench
    assert spec is not None
    found = _patch_candidates(spec.test_patch)
    named = [probe_flip.wanted_tests(ids) for ids in (spec.fail_to_pass, spec.pass_to_pass) if ids]
    pool = next((chosen for wanted in named if (chosen := [c for c in found if wanted(f"{c[0].path}::{c[1]}")])), [])
    if not pool:
        raise ProbeUnavailable(
            task.instance_id, "swebench.test_patch", "no test it adds or changes has a flippable expected value"
        )
    (line, test, literal), value = probe_flip.choose(pool, seed, lambda item: item[2])
    indent = len(line.text) - len(line.text.lstrip())
    encoded = line.text.encode()
    start, end = indent + literal.col_offset, indent + literal.end_col_offset  # type: ignore[operator]
    rows = spec.test_patch.split("\n")
    rows[line.index] = "+" + (encoded[:start] + repr(value).encode() + encoded[end:]).decode()
    flip = ProbeFlip(
        path=line.path, test=test, line=line.new_line, expected=encoded[start:end].decode(), flipped=repr(value)
    )
    return {"swebench": spec.model_copy(update={"test_patch": "\n".join(rows)})}, flip
