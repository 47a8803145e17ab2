"""The flip of one expected value: which literals qualify, that the flip is exact and deterministic, and the
in-sandbox script's files, record and git history."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from durable_rollouts.task_sources import probe_flip

TESTS = """import pytest
import unittest


def helper():
    assert compute(1) == 2


def test_plain():
    assert compute(2) == 4


def test_literal_first():
    assert "café" == name("cafe")


def test_nested_only():
    with pytest.raises(ValueError):
        assert compute(3) == 9
    for i in range(3):
        assert compute(i) == 0


def test_after_return():
    return
    assert compute(4) == 16


def test_after_skip():
    pytest.skip("later")
    assert compute(5) == 25


@pytest.mark.skip(reason="broken")
def test_skipped():
    assert compute(6) == 36


@pytest.mark.xfail
def test_xfailed():
    assert compute(7) == 49


def test_bool_and_none():
    assert ready() == True
    assert value() == None
    assert name("") == ""


def test_both_literals():
    assert 1 == 1


def test_display():
    assert pairs() == [("the", 3), ("a", 1)]


def test_float():
    assert ratio() == 0.5


class TestThings:
    def test_method(self):
        assert compute(8) == 64


class Things(unittest.TestCase):
    def test_assert_equal(self):
        self.assertEqual(compute(9), 81)
"""


def _found(source: str = TESTS) -> list[tuple[str, str]]:
    return [(candidate.test, repr(candidate.node.value)) for candidate in probe_flip.candidates(source)]


def test_only_top_level_equalities_of_unskipped_tests_with_one_literal_side_qualify():
    assert _found() == [
        ("test_plain", "4"),
        ("test_literal_first", "'café'"),
        ("test_display", "'the'"),
        ("test_float", "0.5"),
        ("TestThings::test_method", "64"),
        ("Things::test_assert_equal", "81"),
    ]


def test_a_source_that_does_not_parse_has_no_candidate():
    assert probe_flip.candidates("def test_x(:\n    assert f() == 1\n") == []


def test_the_flip_replaces_exactly_the_literal_and_no_spelling_of_it_can_equal_the_new_value():
    for seed in range(40):
        outcome = probe_flip.flip_one([("tests/test_x.py", TESTS)], seed)
        assert outcome is not None
        flip, text = outcome
        before, after = TESTS.splitlines(), text.splitlines()
        changed = [index for index, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]
        assert changed == [flip.line - 1]
        assert before[flip.line - 1].replace(flip.expected, flip.flipped, 1) == after[flip.line - 1]
        assert ast.literal_eval(flip.expected) != ast.literal_eval(flip.flipped)
        assert type(ast.literal_eval(flip.expected)) is type(ast.literal_eval(flip.flipped))
        assert ast.parse(text)


def test_the_flip_depends_on_the_seed_alone():
    sources = [("tests/test_x.py", TESTS)]
    assert probe_flip.flip_one(sources, 5) == probe_flip.flip_one(sources, 5)
    assert len({probe_flip.flip_one(sources, seed)[0] for seed in range(30)}) > 3  # type: ignore[index]


def test_a_literal_after_multibyte_text_on_its_line_is_replaced_by_its_utf8_columns():
    source = 'def test_accents():\n    assert slug("Crème brûlée") == "creme-brulee"\n'
    flip, text = probe_flip.flip_one([("t.py", source)], 1)  # type: ignore[misc]
    assert flip.expected == '"creme-brulee"'
    assert 'assert slug("Crème brûlée") == ' + flip.flipped in text


def test_wanted_tests_limits_the_pool_by_node_id_without_parameters():
    wanted = probe_flip.wanted_tests(["tests/test_x.py::test_float", "tests/test_x.py::TestThings::test_method[1-2]"])
    flipped = [probe_flip.flip_one([("tests/test_x.py", TESTS)], seed, wanted) for seed in range(30)]
    flips = {flip[0].test for flip in flipped}  # type: ignore[index]
    assert flips == {"test_float", "TestThings::test_method"}
    assert (
        probe_flip.flip_one(
            [("tests/test_x.py", TESTS)], 1, probe_flip.wanted_tests(["tests/test_x.py::test_nested_only"])
        )
        is None
    )


def test_test_files_match_git_globs(tmp_path):
    for path in (
        "tests/test_a.py",
        "tests/unit/test_b.py",
        "pkg/test_c.py",
        "pkg/core.py",
        "tests/data.txt",
        ".git/test_d.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert probe_flip.test_files(str(tmp_path), ["**/tests/**"]) == ["tests/test_a.py", "tests/unit/test_b.py"]
    assert probe_flip.test_files(str(tmp_path), ["**/test_*.py"]) == [
        "pkg/test_c.py",
        "tests/test_a.py",
        "tests/unit/test_b.py",
    ]


def _git(cwd: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repository(tmp_path, monkeypatch) -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_one.py").write_text("def test_one():\n    assert f() == 1\n")
    (repo / "tests" / "test_two.py").write_text("def test_two():\n    assert f() == 2\n")
    (repo / "lib.py").write_text("def f():\n    return 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "the task's repository")
    monkeypatch.chdir(repo)
    return repo


def test_the_script_flips_in_the_files_the_command_names_and_folds_the_flip_into_head(repository, tmp_path):
    head = _git(repository, "log", "-1", "--format=%s|%an|%cI")
    record = tmp_path / "flip.json"
    args = [
        "--seed",
        "3",
        "--record",
        str(record),
        "--pattern",
        "**/tests/**",
        "--prefer",
        "python -m pytest tests/test_two.py",
    ]
    assert probe_flip.main(args) == 0
    flip = json.loads(record.read_text())
    assert (flip["path"], flip["test"], flip["expected"]) == ("tests/test_two.py", "test_two", "2")
    assert (
        repository / "tests" / "test_two.py"
    ).read_text() == f"def test_two():\n    assert f() == {flip['flipped']}\n"
    assert _git(repository, "status", "--porcelain") == "", "the flip leaves no change to betray it"
    assert _git(repository, "log", "--format=%s|%an|%cI") == head, "one commit, the same message, author and dates"
    assert _git(repository, "reflog") == ""


def test_the_script_leaves_an_untracked_or_dirty_tree_as_it_is(repository, tmp_path):
    (repository / "lib.py").write_text("def f():\n    return 2\n")
    head = _git(repository, "rev-parse", "HEAD")
    assert probe_flip.main(["--seed", "1", "--record", str(tmp_path / "flip.json"), "--pattern", "**/tests/**"]) == 0
    assert _git(repository, "rev-parse", "HEAD") == head


def test_the_script_records_why_when_there_is_nothing_to_flip(repository, tmp_path):
    record = tmp_path / "flip.json"
    assert probe_flip.main(["--seed", "1", "--record", str(record), "--pattern", "docs/**"]) == 0
    assert json.loads(record.read_text()) == {"error": "no flippable expected value in 0 test files"}


def test_named_tests_come_first_then_the_fallback_never_any_other(repository, tmp_path):
    record = tmp_path / "flip.json"
    base = ["--seed", "1", "--record", str(record), "--pattern", "**/tests/**"]
    probe_flip.main(
        [*base, "--test", "tests/test_one.py::test_missing", "--fallback-test", "tests/test_two.py::test_two"]
    )
    assert json.loads(record.read_text())["test"] == "test_two"
    probe_flip.main([*base, "--test", "tests/test_one.py::test_missing"])
    assert "error" in json.loads(record.read_text())


def test_the_script_runs_on_python_3_8_syntax():
    source = Path(probe_flip.__file__).read_text()
    ast.parse(source, feature_version=(3, 8))


def test_a_guarded_exit_ends_the_body_a_redefined_test_is_the_later_one_and_huge_floats_are_left_alone():
    source = """def test_guarded():
    if ready():
        return
    assert compute(1) == 2


def test_twice():
    assert compute(2) == 3


def test_twice():
    assert compute(3) == 4


def test_huge():
    assert ratio() == 1e20
"""
    assert [(c.test, c.node.value) for c in probe_flip.candidates(source)] == [("test_twice", 4)]


def test_odd_line_breaks_and_crlf_files_are_flipped_in_place(tmp_path, monkeypatch):
    source = "# page\x0cbreak\ndef test_x():\n    assert f() == 7\n"
    flip, text = probe_flip.flip_one([("t.py", source)], 2)  # type: ignore[misc]
    assert text == source.replace("== 7", f"== {flip.flipped}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_y.py").write_bytes(b"def test_y():\r\n    assert g() == 5\r\n")
    assert probe_flip.main(["--seed", "1", "--record", str(tmp_path / "r.json"), "--pattern", "**/tests/**"]) == 0
    flipped = (tmp_path / "tests" / "test_y.py").read_bytes()
    assert flipped.count(b"\r\n") == 2 and b"== 5" not in flipped
