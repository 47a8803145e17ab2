"""Harbor task directories read into ``TaskSpec``s: every field task.toml gives, and each bad directory
reported by its path and field while the others are still read (images built on the real engine)."""

from __future__ import annotations

import base64
import tomllib
import uuid
from pathlib import Path

import pytest

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.tasks import HarborSpec, HarborTestFile, TaskSpec
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.task_sources.dataset_rows import DatasetRow
from durable_rollouts.task_sources.harbor_images import HarborImages, image_tag
from durable_rollouts.task_sources.harbor_tasks import (
    MAX_TESTS_BYTES,
    HarborTaskError,
    read_harbor_tasks,
    reference_patches,
)
from durable_rollouts.trainer_client.batch_runs import invalid_row_record, read_rows

GOOD_TOML = """\
schema_version = "1.1"

[task]
name = "{name}"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 90.5
env = {{ LEVEL = "strict" }}

[agent]
timeout_sec = 300

[environment]
build_timeout_sec = 120.0
cpus = 2
memory_mb = 1536
storage_mb = 4096
"""
DOCKERFILE = "FROM rollout-base:bookworm\nWORKDIR /app\nCOPY app/ /app/\n"


def write_task(directory: Path, toml: str | None = None, dockerfile: str = DOCKERFILE, name: str | None = None) -> Path:
    """A complete Harbor task at ``directory`` (task.toml ``toml`` when given)."""
    (directory / "environment" / "app").mkdir(parents=True)
    (directory / "tests" / "data").mkdir(parents=True)
    (directory / "solution").mkdir()
    (directory / "task.toml").write_text(
        toml if toml is not None else GOOD_TOML.format(name=name or f"pytest/{directory.name}")
    )
    (directory / "instruction.md").write_text(
        "<!-- harbor-canary GUID 1234 -->\n\n# Make hello print hello\n\nFix /app/hello.sh.\n"
    )
    (directory / "environment" / "Dockerfile").write_text(dockerfile)
    (directory / "environment" / "app" / "hello.sh").write_text("echo helo\n")
    test_sh = directory / "tests" / "test.sh"
    test_sh.write_text("#!/usr/bin/env bash\necho 1 >/logs/verifier/reward.txt\n")
    test_sh.chmod(0o755)
    (directory / "tests" / "data" / "fixture.bin").write_bytes(bytes(range(256)))
    (directory / "solution" / "reference.patch").write_text("diff --git a/hello.sh b/hello.sh\n")
    return directory


@pytest.fixture
def built_images(engine):
    """Tags of the test images the reader builds; removed afterwards."""
    mine = {"reference": "harbor-pytest-*"}
    before = {tag for image in engine.images.list(filters=mine) for tag in image.tags}
    yield
    for image in engine.images.list(filters=mine):
        for tag in set(image.tags) - before:
            engine.images.remove(tag, force=True)


def test_a_task_directory_becomes_a_harbor_task_spec(tmp_path, engine, built_images):
    name = f"pytest-good-{uuid.uuid4().hex[:6]}"
    task_dir = write_task(tmp_path / name)
    (row,) = read_harbor_tasks(task_dir)
    assert isinstance(row, DatasetRow), row
    task = row.task
    assert (row.line, task.instance_id, task.workdir, task.grader) == (
        str(task_dir),
        f"pytest/{name}",
        "/app",
        "harbor",
    )
    assert task.image.startswith(f"harbor-pytest-{name}:") and engine.images.get(task.image)
    assert task.problem_statement == "# Make hello print hello\n\nFix /app/hello.sh.\n", (
        "the canary line is stripped, as Harbor does"
    )
    assert task.reference_patch == "diff --git a/hello.sh b/hello.sh\n"
    spec = task.harbor
    assert (spec.verifier_timeout_s, spec.agent_timeout_s, spec.verifier_env, spec.source) == (
        90.5,
        300.0,
        {"LEVEL": "strict"},
        str(task_dir),
    )
    assert [(f.path, f.mode) for f in spec.tests] == [("data/fixture.bin", 0o644), ("test.sh", 0o755)]
    assert base64.b64decode(spec.tests[0].data_b64) == bytes(range(256)), "binary test files travel intact"
    assert task.resources.model_dump() == {"cpus": 2.0, "memory_bytes": 1536 << 20, "disk_bytes": 4096 << 20}
    assert row.raw["environment"]["memory_mb"] == 1536
    assert TaskSpec.model_validate_json(task.model_dump_json()) == task
    budgets = RolloutBudgets(agent_budget_s=1800, eval_timeout_s=600, guard_s=2580).for_task(task)
    assert (budgets.agent_budget_s, budgets.eval_timeout_s, budgets.guard_s) == (300, 91, 2580), (
        "the task lowers the run's budgets"
    )
    capped = RolloutBudgets(agent_budget_s=60, eval_timeout_s=30, guard_s=300).for_task(task)
    assert (capped.agent_budget_s, capped.eval_timeout_s) == (60, 30), "never above the run's"


def test_harbor_defaults_apply_to_what_task_toml_leaves_out(tmp_path, engine, built_images):
    name = f"pytest-defaults-{uuid.uuid4().hex[:6]}"
    task_dir = write_task(tmp_path / name, toml='version = "1.0"\n[environment]\nmemory = "1.5G"\n')
    (row,) = read_harbor_tasks(tmp_path)
    assert isinstance(row, DatasetRow), row
    assert row.task.instance_id == name, "no [task] name: the directory's name"
    assert (row.task.harbor.verifier_timeout_s, row.task.harbor.agent_timeout_s) == (600.0, None)
    assert row.task.resources.model_dump() == {"cpus": 1.0, "memory_bytes": 1536 << 20, "disk_bytes": 10240 << 20}
    budgets = RolloutBudgets(agent_budget_s=1800, eval_timeout_s=300, guard_s=2580).for_task(row.task)
    assert (budgets.agent_budget_s, budgets.eval_timeout_s) == (1800, 300)
    assert reference_patches(task_dir) == [(row.task.problem_statement, row.task.reference_patch)]


def break_task(task_dir: Path, how: str) -> None:
    toml = task_dir / "task.toml"
    match how:
        case "no task.toml":
            toml.unlink()
        case "bad toml":
            toml.write_text("[verifier\ntimeout_sec = 1\n")
        case "wrong type":
            toml.write_text(toml.read_text().replace("timeout_sec = 90.5", 'timeout_sec = "soon"'))
        case "not positive":
            toml.write_text(toml.read_text().replace("cpus = 2", "cpus = 0"))
        case "bad size":
            toml.write_text(toml.read_text().replace("memory_mb = 1536", 'memory = "lots"'))
        case "env not strings":
            toml.write_text(toml.read_text().replace('LEVEL = "strict"', "LEVEL = 3"))
        case "gpus":
            toml.write_text(toml.read_text() + "gpus = 1\n")
        case "section not a table":
            toml.write_text('agent = "fast"\n')
        case "no instruction":
            (task_dir / "instruction.md").unlink()
        case "no test.sh":
            (task_dir / "tests" / "test.sh").unlink()
        case "symlink out of tests":
            (task_dir / "tests" / "secret").symlink_to(task_dir / "task.toml")
        case "tests too big":
            (task_dir / "tests" / "data" / "big.bin").write_bytes(b"x" * (MAX_TESTS_BYTES + 1))
        case "no Dockerfile":
            (task_dir / "environment" / "Dockerfile").unlink()


@pytest.mark.parametrize(
    ("how", "file", "field", "reason"),
    [
        (
            "no task.toml",
            "",
            "task.toml",
            "missing (a Harbor task directory holds task.toml, instruction.md, environment/, tests/test.sh)",
        ),
        (
            "bad toml",
            "",
            "task.toml",
            "invalid TOML (Expected ']' at the end of a table declaration (at line 1, column 10))",
        ),
        ("wrong type", "/task.toml", "verifier.timeout_sec", "must be a number"),
        ("not positive", "/task.toml", "environment.cpus", "must be positive"),
        (
            "bad size",
            "/task.toml",
            "environment.memory",
            "must be a size like '2G' or '512M' (or use environment.memory_mb)",
        ),
        ("env not strings", "/task.toml", "verifier.env.LEVEL", "must be a string"),
        ("gpus", "/task.toml", "environment.gpus", "1 requested; this project's sandboxes have no GPUs"),
        ("section not a table", "/task.toml", "agent", "must be a table"),
        ("no instruction", "", "instruction.md", "missing (it is the problem statement)"),
        ("no test.sh", "", "tests/test.sh", "missing (the verifier Harbor runs)"),
        (
            "symlink out of tests",
            "",
            "tests/secret",
            "a symlink out of tests/ (nothing outside the task's tests is inlined)",
        ),
        (
            "tests too big",
            "",
            "tests",
            f"more than {MAX_TESTS_BYTES:,} bytes of test files (they are inlined into the task)",
        ),
        ("no Dockerfile", "", "environment/Dockerfile", "missing (and task.toml names no environment.docker_image)"),
    ],
)
def test_a_bad_task_directory_is_named_by_path_and_field(tmp_path, how, file, field, reason):
    """Refused before any image is looked for, so no Docker engine is needed."""
    task_dir = write_task(tmp_path / "broken")
    break_task(task_dir, how)
    (error,) = read_harbor_tasks(tmp_path, HarborImages(client=None))
    assert isinstance(error, HarborTaskError)
    assert str(error) == f"{task_dir}{file}: {field}: {reason}"
    assert (error.field, error.line) == (field, str(task_dir))


@pytest.mark.parametrize(
    ("how", "field", "reason"),
    [
        ("long name", "task.name", "600 bytes of UTF-8, over the 512-byte limit"),
        ("control character", "task.name", "contains control characters"),
        ("huge instruction", "instruction.md", "over the 524,288-byte (512 KiB) limit"),
    ],
)
def test_a_task_over_the_limits_is_refused_before_its_image_is_built(
    tmp_path, engine, built_images, how, field, reason
):
    """The limits are checked first: no image exists afterwards under the tag the task would have been built as."""
    stamp = uuid.uuid4().hex[:6]
    names = {
        "long name": f"pytest-long-{stamp}-".ljust(600, "x"),
        "control character": f"pytest-ctl-{stamp}\\tname",
    }  # task.toml reads \t as a tab
    task_dir = write_task(tmp_path / "task", name=names.get(how, f"pytest-big-{stamp}"))
    if how == "huge instruction":
        (task_dir / "instruction.md").write_text("# Do it\n" + "x" * (600 << 10))
    (error,) = read_harbor_tasks(task_dir)
    assert isinstance(error, HarborTaskError) and error.field == field and reason in error.reason, error
    tag = image_tag(tomllib.loads((task_dir / "task.toml").read_text())["task"]["name"], task_dir / "environment")
    assert engine.images.list(name=tag.partition(":")[0]) == [], f"{tag} was built for a task refused by its limits"


def test_bad_directories_are_reported_and_the_others_still_run(tmp_path, engine, built_images, capsys):
    stamp = uuid.uuid4().hex[:6]
    good = write_task(tmp_path / f"b-good-{stamp}", name=f"pytest/good-{stamp}")
    write_task(tmp_path / "a-no-toml").joinpath("task.toml").unlink()
    failing = write_task(
        tmp_path / f"c-fails-{stamp}",
        dockerfile="FROM rollout-base:bookworm\nWORKDIR /app\nRUN echo building-it && exit 3\n",
    )
    twin = write_task(tmp_path / f"d-twin-{stamp}", name=f"pytest/good-{stamp}")
    no_workdir = write_task(
        tmp_path / f"e-no-workdir-{stamp}", dockerfile="FROM rollout-base:bookworm\nCOPY app/ /app/\n"
    )
    (tmp_path / "notes.txt").write_text("not a task")
    rows, errors = read_rows(tmp_path)
    assert [row.line for row in rows] == [str(good)]
    assert [(e.line, e.field) for e in errors] == [
        (str(tmp_path / "a-no-toml"), "task.toml"),
        (str(failing), "environment/Dockerfile"),
        (str(twin), "task.name"),
        (str(no_workdir), "environment/Dockerfile"),
    ]
    build_error = str(errors[1])
    assert build_error.startswith(f"{failing}: environment/Dockerfile: the build failed: ")
    assert "exit 3" in build_error or "returned a non-zero code: 3" in build_error
    assert "building-it" in build_error, "the build log's tail is in the error"
    assert str(errors[2]) == f"{twin}/task.toml: task.name: 'pytest/good-{stamp}' is also the name of {good}"
    assert "WORKDIR" in str(errors[3])
    printed = capsys.readouterr().err
    assert printed.count("skipping bad row") == 4 and str(failing) in printed
    record = invalid_row_record(errors[0])
    assert (record["abort_reason"], record["line"], record["error"]) == (
        "invalid_row:task.toml",
        errors[0].line,
        str(errors[0]),
    )
    slashed = invalid_row_record(HarborTaskError(tmp_path, "tests/test.sh", "missing"))
    assert slashed["abort_reason"] == "invalid_row:tests.test.sh", "a documented open form (no '/')"


def test_a_prebuilt_docker_image_is_used_as_is_and_must_be_present_with_pulls_off(tmp_path, engine, built_images):
    """(Pulled from a registry when pulls are on: ``tests/docker_sandbox/test_image_pull.py``.)"""
    stamp = uuid.uuid4().hex[:6]
    base = write_task(tmp_path / f"pytest-base-{stamp}")
    (built,) = read_harbor_tasks(base)
    image = built.task.image
    prebuilt = write_task(
        tmp_path / "sub" / "prebuilt",
        toml=f'[environment]\ndocker_image = "{image}"\n',
        dockerfile="FROM nothing-here\n",
    )
    missing = write_task(
        tmp_path / "sub" / "missing", toml='[environment]\ndocker_image = "harbor-pytest-absent:nope"\n'
    )
    absent, used = read_harbor_tasks(tmp_path / "sub", image_settings=ImageSettings(pull_policy="never"))
    assert isinstance(absent, HarborTaskError) and isinstance(used, DatasetRow), (used, absent)
    assert (used.task.image, used.task.workdir) == (image, "/app"), "the Dockerfile is not built when an image is named"
    assert (
        str(absent)
        == f"{missing}/task.toml: environment.docker_image: harbor-pytest-absent:nope is not present on this Docker "
        f"engine and ROLLOUT_PULL_POLICY is never"
    )
    assert prebuilt.exists()


def test_the_example_harbor_tasks_read_cleanly(engine):
    """Both examples, one with reward.txt and one with reward.json, each with a reference patch for the oracle."""
    rows, errors = read_rows(Path(__file__).resolve().parents[2] / "examples" / "harbor_tasks")
    assert errors == []
    assert {row.task.instance_id for row in rows} == {"rollouts/temperature-reward-txt", "rollouts/median-reward-json"}
    assert all(row.task.reference_patch and row.task.workdir == "/app" for row in rows)


def test_old_tasks_decode_without_the_harbor_fields():
    old = TaskSpec.model_validate(
        {"instance_id": "x", "image": "i", "workdir": "/w", "problem_statement": "p", "eval_cmd": "true"}
    )
    assert (old.harbor, old.resources, old.grader) == (None, None, "eval_cmd")
    spec = HarborSpec(tests=[HarborTestFile(path="test.sh", data_b64="")])
    assert spec.verifier_timeout_s == 600.0
    with pytest.raises(ValueError, match="'..' is not allowed"):
        HarborTestFile(path="../escape.sh", data_b64="")
