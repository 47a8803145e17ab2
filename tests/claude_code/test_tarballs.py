"""Claude Code from host tarballs: both package shapes, errors naming the variable, one unpack per host,
and the real npm tarballs (`make setup` fetches them) running inside a sandbox from a read-only mount."""

from __future__ import annotations

import io
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from durable_rollouts.claude_code.tarballs import ClaudeTarballError, install_from_tarballs
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.docker_sandbox import container_layout
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import PROJECT_ROOT

TARBALLS = PROJECT_ROOT / ".cache" / "tarballs"
REAL_CC = TARBALLS / "anthropic-ai-claude-code-2.0.54.tgz"


def tarball(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            archive.addfile(info, io.BytesIO(data))
    return path


def run(binary: Path, *args: str) -> str:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, check=True).stdout


def test_a_native_platform_package_needs_no_node(tmp_path):
    cc = tarball(tmp_path / "claude-code-linux-x64.tgz", {"package/claude": "#!/bin/sh\necho native $1\n"})
    root = install_from_tarballs(cc, None, tmp_path / "cache")
    assert run(root / "bin" / "claude", "--version") == "native --version\n"


def test_a_javascript_cli_runs_with_the_node_tarball_from_any_mount_point(tmp_path):
    cc = tarball(tmp_path / "claude-code.tgz", {"package/cli.js": "cli says", "package/package.json": "{}"})
    node = tarball(tmp_path / "node.tar.gz", {"node-v22-linux-x64/bin/node": '#!/bin/sh\necho "$(cat "$1")" "$2"\n'})
    root = install_from_tarballs(cc, node, tmp_path / "cache")
    moved = tmp_path / "elsewhere"
    root.rename(moved)
    assert run(moved / "bin" / "claude", "--version") == "cli says --version\n"


def test_the_same_tarballs_are_unpacked_once(tmp_path):
    cc = tarball(tmp_path / "cc.tgz", {"package/claude": "#!/bin/sh\n"})
    first = install_from_tarballs(cc, None, tmp_path / "cache")
    (first / "marker").write_text("kept")
    again = install_from_tarballs(cc, None, tmp_path / "cache")
    assert again == first and (again / "marker").read_text() == "kept"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]


@pytest.mark.parametrize(
    "cc_files, with_node, node_files, message",
    [
        ({"package/cli.js": ""}, False, {}, r"^SWE_HOST_CC_TARBALL=.* JavaScript CLI: set SWE_HOST_NODE_TARBALL"),
        ({"package/README.md": ""}, False, {}, r"^SWE_HOST_CC_TARBALL=.* neither package/claude"),
        ({"package/cli.js": ""}, True, {"node/README": ""}, r"^SWE_HOST_NODE_TARBALL=.* no bin/node"),
    ],
)
def test_unusable_tarballs_name_the_variable(tmp_path, cc_files, with_node, node_files, message):
    cc = tarball(tmp_path / "cc.tgz", cc_files)
    node = tarball(tmp_path / "node.tgz", node_files) if with_node else None
    with pytest.raises(ClaudeTarballError, match=message):
        install_from_tarballs(cc, node, tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_a_file_that_is_not_a_tarball_names_the_variable(tmp_path):
    bogus = tmp_path / "cc.tgz"
    bogus.write_text("not a tarball")
    with pytest.raises(ClaudeTarballError, match=r"^SWE_HOST_CC_TARBALL=.*cannot unpack"):
        install_from_tarballs(bogus, None, tmp_path / "cache")


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_npm_tarballs_run_claude_code_in_a_sandbox(tmp_path, task_images, tasks, reap_prefix):
    node = next(TARBALLS.glob("node-linux-*.tgz"), None)
    if not REAL_CC.is_file() or node is None:
        pytest.skip("run `make setup` to fetch the tarballs")
    root = install_from_tarballs(REAL_CC, node, tmp_path / "cache")
    prefix = f"pytest-tarballs-{uuid.uuid4().hex[:8]}"
    request = SandboxRequest(task=tasks["calc-eval-cmd"], workflow_id=f"{prefix}-boot", attempt=0)
    sandboxes = DockerSandboxes(SandboxSettings(claude_code=root, lifetime_s=600))
    handle = await sandboxes.boot(request)
    try:
        version = await sandboxes.exec(handle, f"{container_layout.CLAUDE_MOUNT_PATH} --version", timeout_s=60)
        assert version.exit_code == 0 and version.output.strip() == "2.0.54 (Claude Code)", version.output
        denied = await sandboxes.exec(handle, f"touch {container_layout.CLAUDE_MOUNT_ROOT}/node/bin/x", user="root")
        assert denied.exit_code != 0
    finally:
        await sandboxes.destroy(handle)
    assert await reap_prefix(prefix) == []
