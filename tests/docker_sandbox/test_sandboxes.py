"""The Docker sandbox against a real engine: boot, exec, detached commands, git diff, destroy, reap.

Every container a test creates carries a workflow id with this module's
prefix; the module fixture reaps them all at teardown, even after failures.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import docker
import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import sandbox as sandbox_faces
from durable_rollouts.claude_code.binary import CLAUDE_CODE_VERSION, find_claude_binary
from durable_rollouts.contracts.grading import DiffReport, OmittedFile
from durable_rollouts.contracts.sandboxes import SandboxHandle, SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import (
    commands,
    container_layout,
    detached,
    disk_watch,
    errors,
    git_workspace,
    lifecycle,
    workspace_diff,
)
from durable_rollouts.docker_sandbox import files as files_module
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from testbed.call_counts import CountingSandboxes
from tests.waiting import HANG_GUARD_S, until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WORKFLOW_LABEL = f"{container_layout.LABEL_PREFIX}.workflow_id"
# Sandboxes as a test boots them: default limits, no network, no Claude Code.
SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def prefix(task_images, reap_prefix):
    """The workflow-id prefix of this module's containers; all of them are reaped at teardown."""
    value = f"pytest-sandbox-{uuid.uuid4().hex[:8]}"
    yield value
    await reap_prefix(value)


@pytest.fixture(scope="module")
def calc_task(tasks) -> TaskSpec:
    return tasks["calc-eval-cmd"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def booted(prefix, calc_task):
    """One agent sandbox with the Claude Code binary and explicit limits, shared by the read-only checks."""
    caps = SandboxLimits(cpus=1.5, memory_bytes=1 << 30, pids=256)
    settings = SandboxSettings(host_queue="rl-host-test", lifetime_s=600, claude_code=find_claude_binary(), limits=caps)
    request = SandboxRequest(task=calc_task, workflow_id=f"{prefix}-boot", attempt=2)
    handle = await DockerSandboxes(settings).boot(request)
    yield handle
    await SANDBOXES.destroy(handle)


async def fresh(prefix: str, task: TaskSpec, name: str) -> SandboxHandle:
    return await SANDBOXES.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-{name}", attempt=0))


def inspect(handle: SandboxHandle) -> dict:
    return docker.from_env().containers.get(handle.container_id).attrs


async def test_agent_user_owns_the_workspace(booted, calc_task):
    result = await SANDBOXES.exec(booted, "id -u; stat -c %U .; stat -c %U .git/index; git status --porcelain")
    uid, owner, index_owner, status = (result.output.splitlines() + [""])[:4]
    assert result.exit_code == 0, result.output
    assert (uid, owner, index_owner) == ("1000", "agent", "agent")
    assert status == "?? PROBLEM_STATEMENT.md"
    statement = await SANDBOXES.read_file(
        booted, f"{calc_task.workdir}/{git_workspace.PROBLEM_STATEMENT_FILE}", 1 << 16
    )
    assert statement.decode() == calc_task.problem_statement
    config = await SANDBOXES.read_file(booted, "/home/agent/.claude.json", 4096)
    assert json.loads(config) == container_layout.CLAUDE_CONFIG
    modes = await SANDBOXES.exec(
        booted, f"stat -c '%U %a' /home/agent/.claude.json {git_workspace.PROBLEM_STATEMENT_FILE}"
    )
    assert modes.output.split("\n")[:2] == ["agent 600", "agent 644"], modes.output


async def test_a_swebench_testbed_env_comes_first_on_the_agents_path(prefix, calc_task):
    handle = await fresh(prefix, calc_task, "testbed")
    try:
        plain = await SANDBOXES.exec(handle, "echo $PATH")
        assert container_layout.SWEBENCH_TESTBED_BIN not in plain.output
        await SANDBOXES.exec(handle, f"mkdir -p {container_layout.SWEBENCH_TESTBED_BIN}", user="root")
        login = await SANDBOXES.exec(handle, "echo $PATH")
        assert login.output.startswith(f"{container_layout.SWEBENCH_TESTBED_BIN}:"), login.output
    finally:
        await SANDBOXES.destroy(handle)


async def test_labels_and_limits(booted, prefix):
    attrs = inspect(booted)
    labels = attrs["Config"]["Labels"]
    assert labels[f"{container_layout.LABEL_PREFIX}.managed"] == "1"
    assert labels[WORKFLOW_LABEL] == f"{prefix}-boot"
    assert labels[f"{container_layout.LABEL_PREFIX}.attempt"] == "2"
    assert labels[f"{container_layout.LABEL_PREFIX}.instance_id"] == "calc-eval-cmd"
    assert labels[f"{container_layout.LABEL_PREFIX}.purpose"] == "agent"
    assert labels[f"{container_layout.LABEL_PREFIX}.host_queue"] == "rl-host-test"
    assert 500 < int(labels[f"{container_layout.LABEL_PREFIX}.expires_at"]) - time.time() <= 600
    host = attrs["HostConfig"]
    assert (host["NanoCpus"], host["Memory"], host["PidsLimit"], host["Init"]) == (1_500_000_000, 1 << 30, 256, True)
    assert host["AutoRemove"] is False
    assert attrs["Config"]["Entrypoint"] == ["sleep"] and attrs["Config"]["Cmd"] == ["600"]
    assert attrs["Name"] == f"/{booted.name}" and booted.name.startswith("rollout-")


async def test_claude_binary_mounted_read_only(booted):
    (mount,) = [m for m in inspect(booted)["Mounts"] if m["Destination"] == container_layout.CLAUDE_MOUNT_PATH]
    assert mount["RW"] is False
    result = await SANDBOXES.exec(booted, f"{container_layout.CLAUDE_MOUNT_PATH} --version", timeout_s=60)
    assert result.exit_code == 0 and result.output.startswith(CLAUDE_CODE_VERSION), result.output
    denied = await SANDBOXES.exec(booted, f"echo x >> {container_layout.CLAUDE_MOUNT_PATH}", user="root")
    assert denied.exit_code != 0


async def test_exec_timeout_kills_the_command(booted):
    result = await SANDBOXES.exec(booted, "echo begun; sleep 31", timeout_s=1)
    assert result.timed_out and "begun" in result.output
    leftovers = await SANDBOXES.exec(booted, "pgrep -fx 'sleep 31' || true")
    assert leftovers.output.strip() == ""


async def test_exec_env_reaches_the_command_verbatim(booted):
    value = 'it\'s "quoted" $HOME `x`\nsecond line'
    result = await SANDBOXES.exec(booted, 'printf %s "$TRICKY"', env={"TRICKY": value})
    assert result.output == value


async def test_steps_in_one_exec_come_back_one_result_each_and_stop_at_the_first_failure(booted):
    steps = ["printf 'no newline'; echo err >&2", "set -e; false; echo not reached", "echo never run"]
    ok, failed = await SANDBOXES.exec_steps(booted, steps)
    assert (ok.exit_code, ok.output) == (0, "no newlineerr\n"), "stderr joins stdout, nothing of the boundary is left"
    assert (failed.exit_code, failed.output) == (1, ""), (
        "a step's set -e and exit stay in its subshell; the rest do not run"
    )
    whoami, listing = await SANDBOXES.exec_steps(booted, ["id -un", "printf 'a\\0b\\0'; exit 0"], user="root")
    assert (whoami.output, listing.output) == ("root\n", "a\0b\0")
    done, cut = await SANDBOXES.exec_steps(booted, ["true", "echo begun; sleep 31", "echo never run"], timeout_s=1)
    assert done.exit_code == 0 and cut.timed_out and cut.output.startswith("begun")


async def test_detached_command_exit_marker_and_reattach(booted):
    env = {"GREETING": "hello 'world' $x"}
    await SANDBOXES.start_detached(booted, "job", 'echo "$GREETING"; echo oops >&2; sleep 1; exit 7', env=env)
    assert await SANDBOXES.detached_status(booted, "job") == detached.DetachedStatus(started=True, running=True)
    assert await SANDBOXES.wait_detached(booted, "job", timeout_s=20) == 7, "the exit code, not the timeout's None"
    assert await SANDBOXES.wait_detached(booted, "job", timeout_s=5) == 7
    finished = detached.DetachedStatus(started=True, running=False, exit_code=7)
    assert await SANDBOXES.detached_status(booted, "job") == finished
    assert await SANDBOXES.read_file(booted, "/tmp/rollout/job.out", 100) == b"hello 'world' $x\n"
    assert await SANDBOXES.read_file(booted, "/tmp/rollout/job.err", 100) == b"oops\n"
    with pytest.raises(errors.SandboxError, match="already started"):
        await SANDBOXES.start_detached(booted, "job", "true")
    assert b"exit 7" in await SANDBOXES.read_file(booted, "/tmp/rollout/job.sh", 1000)
    staged = await SANDBOXES.exec(booted, "ls /tmp/rollout/ | grep -c '[.]new$' || true")
    assert staged.output.strip() == "0"


async def test_detached_wait_timeout_kill_and_cancel(booted):
    await SANDBOXES.start_detached(booted, "sleeper", "sleep 300")
    assert await SANDBOXES.wait_detached(booted, "sleeper", timeout_s=0.5) is None
    waiter = asyncio.create_task(SANDBOXES.wait_detached(booted, "sleeper", timeout_s=60))
    await asyncio.sleep(0.5)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiter, 5)
    await SANDBOXES.kill_detached(booted, "sleeper")
    assert await SANDBOXES.wait_detached(booted, "sleeper", timeout_s=10) == 143
    with pytest.raises(errors.SandboxError, match="never started"):
        await SANDBOXES.wait_detached(booted, "nothing", timeout_s=5)
    assert await SANDBOXES.detached_status(booted, "nothing") == detached.DetachedStatus(started=False, running=False)


async def test_run_detached_starts_and_waits_in_one_exec_and_its_timeout_leaves_the_command_running(booted):
    """One round trip for a start and its wait (a grader's tests); when the wait times out, the exec's ``timeout``
    takes neither the command nor its runner, so ``kill_detached`` still ends it with an exit marker."""
    env = {"GREETING": "hi"}
    assert await SANDBOXES.run_detached(booted, "run-job", 'echo "$GREETING"; exit 9', timeout_s=30, env=env) == 9
    assert await SANDBOXES.read_file(booted, f"{git_workspace.HARNESS_DIR}/run-job.out", 100) == b"hi\n"
    with pytest.raises(errors.SandboxError, match="already started"):
        await SANDBOXES.run_detached(booted, "run-job", "true", timeout_s=30)
    assert await SANDBOXES.run_detached(booted, "run-sleeper", "sleep 300", timeout_s=0.5) is None
    assert (await SANDBOXES.detached_status(booted, "run-sleeper")).running
    await SANDBOXES.kill_detached(booted, "run-sleeper")
    assert await SANDBOXES.wait_detached(booted, "run-sleeper", timeout_s=10) == 143, (
        "the runner outlived the exec's timeout"
    )


async def test_a_wait_wakes_on_the_runners_fifo_and_falls_back_to_polling_without_it(booted):
    """The runner's FIFO wakes a waiter blocked before the command ended; a waiter whose FIFO is gone polls, with the
    same answers; while it waits, a FIFO waiter forks nothing (its bash has no child)."""
    await SANDBOXES.start_detached(booted, "fifo-wait", "sleep 2; exit 7")
    waiter = asyncio.create_task(SANDBOXES.wait_detached(booted, "fifo-wait", timeout_s=60))
    await asyncio.sleep(1)
    listing = (await SANDBOXES.exec(booted, "ps -eo pid=,ppid=,args=", user="root")).output.splitlines()
    processes = [line.split(None, 2) for line in listing if line.strip()]
    waiting = [
        pid
        for pid, _, args in processes
        if args.startswith("bash -c") and "sandbox_wait.sh" in args and "fifo-wait" in args
    ]
    assert len(waiting) == 1, listing
    assert [args for _, ppid, args in processes if ppid == waiting[0]] == [], "the waiting bash forks nothing"
    assert await waiter == 7
    await SANDBOXES.start_detached(booted, "poll-wait", "sleep 1; exit 5")
    await SANDBOXES.exec(booted, f"rm {git_workspace.HARNESS_DIR}/poll-wait.done", user="root")
    assert await SANDBOXES.wait_detached(booted, "poll-wait", timeout_s=60) == 5


async def test_a_script_too_long_for_an_argument_is_staged_by_archive_and_runs_the_same(booted):
    """Over ``MAX_ARGUMENT_BYTES`` the script cannot be an exec argument (the kernel allows 128 KiB one): it is staged
    as a file first, and runs as a short one does."""
    padding = "# " + "x" * 1000 + "\n"
    script = padding * (commands.MAX_ARGUMENT_BYTES // len(padding) + 8) + "echo long script ran; exit 6\n"
    assert len(script.encode()) > commands.MAX_ARGUMENT_BYTES
    await SANDBOXES.start_detached(booted, "long-script", script)
    assert await SANDBOXES.wait_detached(booted, "long-script", timeout_s=60) == 6
    assert (
        await SANDBOXES.read_file(booted, f"{git_workspace.HARNESS_DIR}/long-script.out", 100) == b"long script ran\n"
    )
    with pytest.raises(errors.SandboxError, match="already started"):
        await SANDBOXES.start_detached(booted, "long-script", script)


async def test_files_written_by_a_step_are_the_files_an_archive_writes(booted):
    """``files_step`` writes what ``write_files`` would (content byte for byte, owner and group, mode, missing
    parents, a file replaced whole) from inside a root exec; what cannot be one exec argument is left to the archive."""
    text = 'it\'s "quoted" $HOME `x` \\n ünïcode\n\nlast line without newline'
    files = [
        files_module.SandboxFile("/tmp/step-files/new/dir/a.txt", text, 1000, 0o600),
        files_module.SandboxFile("/tmp/step-files/b.sh", b"#!/bin/sh\necho b\n", 0, 0o755),
    ]
    step = files_module.files_step(files)
    assert step is not None
    await SANDBOXES.exec(booted, "mkdir -p /tmp/step-files && echo old old old old > /tmp/step-files/b.sh", user="root")
    (done,) = await SANDBOXES.exec_steps(booted, [step], user="root")
    assert done.exit_code == 0, done.output
    stat = await SANDBOXES.exec(
        booted, "stat -c '%u %g %a' /tmp/step-files/new/dir/a.txt /tmp/step-files/new /tmp/step-files/b.sh", user="root"
    )
    assert stat.output.split("\n")[:3] == ["1000 1000 600", "0 0 755", "0 0 755"]
    assert await SANDBOXES.read_file(booted, "/tmp/step-files/new/dir/a.txt", 1000) == text.encode()
    assert await SANDBOXES.read_file(booted, "/tmp/step-files/b.sh", 1000) == b"#!/bin/sh\necho b\n"
    big = files_module.SandboxFile("/tmp/big", "x" * commands.MAX_ARGUMENT_BYTES)
    assert files_module.files_step([big]) is None
    assert files_module.files_step([files_module.SandboxFile("/tmp/nul", b"a\0b")]) is None
    assert files_module.files_step([files_module.SandboxFile("/tmp/latin1", "é".encode("latin-1"))]) is None


async def test_read_file_tail_and_missing(booted):
    await SANDBOXES.exec(booted, "seq 1 10000 > /tmp/numbers")
    assert (await SANDBOXES.read_file(booted, "/tmp/numbers", 6, tail=True)) == b"10000\n"
    assert (await SANDBOXES.read_file(booted, "/tmp/numbers", 4)) == b"1\n2\n"
    with pytest.raises(FileNotFoundError):
        await SANDBOXES.read_file(booted, "/tmp/absent", 10)


async def test_read_file_tail_across_many_chunks(booted):
    """A tail longer than one read chunk (64 KiB) of a file many chunks long: exactly the file's last bytes."""
    await SANDBOXES.exec(booted, "seq 1 300000 > /tmp/many")
    whole = "".join(f"{n}\n" for n in range(1, 300001)).encode()
    assert (await SANDBOXES.read_file(booted, "/tmp/many", 200_001, tail=True)) == whole[-200_001:]
    assert (await SANDBOXES.read_file(booted, "/tmp/many", len(whole) + 10, tail=True)) == whole


def patched_paths(diff: str) -> set[str]:
    return {line.split(" b/")[-1] for line in diff.splitlines() if line.startswith("diff --git")}


async def assert_patch_applies_to_the_baseline(handle) -> None:
    """The captured patch applies to the workspace once the agent's edits are stashed away."""
    check = await SANDBOXES.exec(handle, f"git stash -u -q && git apply --check {git_workspace.DIFF_OUT}/patch")
    assert check.exit_code == 0, check.output


async def test_git_diff_new_modified_binary_and_exclusions(prefix, calc_task):
    task = calc_task.model_copy(update={"pre_commands": ["echo generated > build.cfg"]})
    handle = await fresh(prefix, task, "diff")
    try:
        edit = (
            "sed -i 's/0.3.1/0.3.2/' calc/__init__.py && echo 'print(1)' > calc/extra.py"
            " && printf '\\000\\001\\377' > logo.bin && mkdir -p .claude && echo {} > .claude/settings.json"
            " && echo 'tampered' >> PROBLEM_STATEMENT.md && python3 -m compileall -q calc"
        )
        assert (await SANDBOXES.exec(handle, edit)).exit_code == 0
        captured = await SANDBOXES.capture_diff(handle)
        diff = captured.diff
        assert patched_paths(diff) == {"calc/__init__.py", "calc/extra.py", "logo.bin"}
        assert "GIT binary patch" in diff and '+__version__ = "0.3.2"' in diff
        assert captured.report == DiffReport(patch_bytes=len(diff.encode()))
        kept = await ActivityEnvironment().run(sandbox_faces.SandboxActivities(SANDBOXES).capture_diff, handle)
        assert kept == captured, "the activity returns the patch itself (the rollout keeps it in its result)"
        assert kept.report.kept_patch is None, "capture_diff's own report carries no copy of the patch"
        status = await SANDBOXES.exec(handle, "git status --porcelain --untracked-files=no")
        assert status.output.strip() == "M calc/__init__.py", "the agent's own index must stay untouched"
        await assert_patch_applies_to_the_baseline(handle)
    finally:
        await SANDBOXES.destroy(handle)


async def test_files_over_the_per_file_limit_are_left_out_of_the_patch_and_named(prefix, calc_task):
    """A 30 MB blob beside a real fix: the patch carries the fix and names the blob; big files that are
    unchanged from the baseline or ignored by git are neither in the patch nor named; a one-line edit of a
    big file the baseline has is a one-line patch."""
    setup = [
        "head -c 3000000 /dev/urandom > data.bin && seq 1 400000 > table.py && git add data.bin table.py"
        " && git -c user.name=t -c user.email=t@t commit -qm data",
        "echo 'ignored/' > .gitignore && mkdir -p ignored",
    ]
    handle = await fresh(prefix, calc_task.model_copy(update={"pre_commands": setup}), "bigfile")
    try:
        edit = (
            "sed -i 's/0.3.1/0.3.2/' calc/__init__.py && head -c 30000000 /dev/urandom > blob.bin"
            " && mkdir -p 'odd dir' && head -c 2000000 /dev/zero > 'odd dir/zeros \u00e9.bin'"
            " && head -c 5000000 /dev/urandom > ignored/cache.bin && touch data.bin && sed -i '1s/.*/0/' table.py"
        )
        assert (await SANDBOXES.exec(handle, edit)).exit_code == 0
        captured = await SANDBOXES.capture_diff(handle)
        assert patched_paths(captured.diff) == {"calc/__init__.py", "table.py"}
        assert "-1\n+0\n" in captured.diff and len(captured.diff) < 4096
        report = captured.report
        assert sorted(report.omitted, key=lambda f: f.path) == [
            OmittedFile(path="blob.bin", size_bytes=30_000_000),
            OmittedFile(path="odd dir/zeros \u00e9.bin", size_bytes=2_000_000),
        ]
        assert (report.omitted_count, report.over_cap, report.patch_bytes) == (2, False, len(captured.diff.encode()))
        await assert_patch_applies_to_the_baseline(handle)
    finally:
        await SANDBOXES.destroy(handle)


async def test_a_patch_over_the_cap_comes_back_empty_and_marked(prefix, calc_task, monkeypatch):
    handle = await fresh(prefix, calc_task, "overcap")
    try:
        files = " && ".join(f"head -c 600000 /dev/urandom | base64 > notes{i}.txt" for i in range(3))
        assert (await SANDBOXES.exec(handle, files)).exit_code == 0
        captured = await SANDBOXES.capture_diff(handle)
        report = captured.report
        assert captured.diff == "" and report.over_cap and report.omitted == []
        assert report.patch_bytes > workspace_diff.MAX_DIFF_BYTES
        assert (
            report.note
            == f"the patch is {report.patch_bytes:,} bytes, over the {workspace_diff.MAX_DIFF_BYTES:,}-byte cap"
        )
        monkeypatch.setattr(workspace_diff, "MAX_NEW_FILES_BYTES", 1 << 20)
        untaken = (await SANDBOXES.capture_diff(handle)).report
        assert (untaken.over_cap, untaken.patch_bytes) == (True, 0)
        assert untaken.note.startswith("the new files total ") and "more than 1,048,576" in untaken.note
        faces = sandbox_faces.SandboxActivities(SANDBOXES)
        over = await ActivityEnvironment().run(faces.capture_diff, handle)
        assert (over.diff, over.report.over_cap, over.report.kept_patch) == ("", True, None), (
            "nothing was captured over the cap, so nothing is kept"
        )
    finally:
        await SANDBOXES.destroy(handle)


@pytest.mark.parametrize("use_write_counter", [True, False], ids=["write-counter", "docker-only"])
async def test_the_disk_watch_stops_a_writer_past_the_budget(prefix, calc_task, use_write_counter):
    """Usage counts from the end of boot; a command writing past a small budget loses the race to the watch."""
    handle = await fresh(prefix, calc_task, f"disk-{int(use_write_counter)}")
    try:
        assert handle.disk_baseline_bytes > 0, "the boot's chown copies the workspace up into the layer"
        assert await disk_watch.used_bytes(SANDBOXES, handle) < 1 << 20
        async with disk_watch.DiskWatch(
            SANDBOXES, handle, budget_bytes=8 << 20, use_write_counter=use_write_counter
        ) as watch:
            await SANDBOXES.start_detached(handle, "writer", "head -c 32000000 /dev/zero > fill.bin && sleep 300")
            assert await watch.first(SANDBOXES.wait_detached(handle, "writer", timeout_s=120)) is None
            assert watch.exceeded and watch.used >= 8 << 20
        assert (await SANDBOXES.detached_status(handle, "writer")).running, (
            "the watch only reports; its caller stops the agent"
        )
        written = await SANDBOXES.exec(
            handle, "timeout 60 sh -c 'until [ \"$(stat -c %s fill.bin)\" = 32000000 ]; do sleep 0.1; done'"
        )
        assert written.exit_code == 0, (
            "the watch may fire while the writer is still writing: the roomy watch below needs all of it"
        )
        async with disk_watch.DiskWatch(SANDBOXES, handle, budget_bytes=0) as unbounded:
            assert not await unbounded.over_at_start() and not await unbounded.check()
        async with disk_watch.DiskWatch(SANDBOXES, handle, budget_bytes=16 << 20) as tight:
            assert await tight.over_at_start() and tight.exact_samples == 1, "the first size, taken as the watch starts"
        async with disk_watch.DiskWatch(SANDBOXES, handle, budget_bytes=64 << 20) as roomy:
            assert not await roomy.over_at_start() and 32_000_000 <= roomy.used < 64 << 20
            assert not await roomy.check()
    finally:
        await SANDBOXES.destroy(handle)


async def test_the_disk_watch_asks_docker_for_the_layer_size_only_when_the_written_bytes_could_pass_the_budget(
    prefix, calc_task
):
    """The watch takes one exact size as it starts, then reads the container's written bytes: writes well under the
    budget cost no further exact size; a rewrite of the same file that adds up past it costs one, which finds the
    layer under it."""
    handle = await fresh(prefix, calc_task, "disk-counter")
    try:
        async with disk_watch.DiskWatch(SANDBOXES, handle, budget_bytes=24 << 20) as watch:
            await until(lambda: watch.exact_samples == 1)
            await SANDBOXES.exec(handle, "head -c 8000000 /dev/zero > small.bin")
            await asyncio.sleep(3 * disk_watch.TICK_S)
            assert watch.exact_samples == 1
            await SANDBOXES.exec(handle, "for i in 1 2 3 4; do head -c 8000000 /dev/zero > small.bin; sync; done")
            await asyncio.sleep(3 * disk_watch.TICK_S)
            assert watch.exact_samples >= 2 and not watch.exceeded and watch.used < 24 << 20
    finally:
        await SANDBOXES.destroy(handle)


async def test_what_was_written_before_the_disk_watch_started_counts_from_its_first_moment(
    prefix, calc_task, monkeypatch
):
    """A job can write past the budget before its watch reads the written-bytes counter (a grader starts its tests,
    then its watch; a loaded engine answers the watch's first calls late; a resumed attempt watches a run already
    under way): the counter's origin then already holds those bytes, so only an exact size can see them, and
    the watch takes one as it starts rather than ``EXACT_INTERVAL_S`` later."""
    monkeypatch.setattr(disk_watch, "EXACT_INTERVAL_S", 3600.0)
    handle = await fresh(prefix, calc_task, "disk-before")
    try:
        await SANDBOXES.exec(handle, "head -c 32000000 /dev/zero > fill.bin")
        async with disk_watch.DiskWatch(SANDBOXES, handle, budget_bytes=8 << 20) as watch:
            assert await asyncio.wait_for(watch.first(asyncio.Event().wait()), HANG_GUARD_S) is None
            assert watch.exceeded and watch.exact_samples == 1 and watch.used >= 32_000_000
    finally:
        await SANDBOXES.destroy(handle)


async def test_missing_image_with_pulls_off_raises_and_leaves_nothing(prefix, calc_task):
    task = calc_task.model_copy(update={"image": "rollout-task-does-not-exist:latest"})
    sandboxes = DockerSandboxes(SandboxSettings(lifetime_s=600, images=ImageSettings(pull_policy="never")))
    with pytest.raises(
        errors.SandboxImageMissing, match="rollout-task-does-not-exist:latest is not on this host's engine"
    ):
        await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-missing", attempt=0))
    with pytest.raises(ApplicationError) as caught:
        request = SandboxRequest(task=task, workflow_id=f"{prefix}-missing", attempt=0)
        await ActivityEnvironment().run(sandbox_faces.boot_sandbox, sandboxes, request)
    assert caught.value.type == "SandboxImageMissing" and caught.value.non_retryable


async def test_failing_pre_command_removes_the_container(prefix, calc_task):
    task = calc_task.model_copy(update={"pre_commands": ["true", "echo about to fail; false; echo unreachable"]})
    with pytest.raises(errors.SandboxError, match=r"pre_commands\[1\] failed \(exit 1\)") as caught:
        await fresh(prefix, task, "prefail")
    assert str(caught.value).endswith("\nabout to fail\n"), "set -e stops at the failing line"
    left = [c for c in await SANDBOXES.list_managed() if c.labels.get(WORKFLOW_LABEL) == f"{prefix}-prefail"]
    assert left == []


async def test_a_grading_sandbox_prepares_and_records_its_baseline_in_one_exec_and_reports_either_failure(
    prefix, calc_task, monkeypatch
):
    """A grading sandbox runs everything as root, so its workspace set-up becomes the set-up steps' exec: one exec
    for both, a failure of either still reported as its own (the set-up's, or the step's by its label), and the
    container removed."""

    async def boot(task: TaskSpec, name: str) -> SandboxHandle:
        return await SANDBOXES.boot(
            SandboxRequest(task=task, workflow_id=f"{prefix}-{name}", attempt=0, purpose="grading")
        )

    stepped = calc_task.model_copy(update={"pre_commands": ["echo one > one.txt"]})
    counting = CountingSandboxes(SandboxSettings(lifetime_s=600))
    handle = await counting.boot(
        SandboxRequest(task=stepped, workflow_id=f"{prefix}-grading-boot", attempt=0, purpose="grading")
    )
    try:
        assert counting.calls["exec"] == 1
        assert (await SANDBOXES.exec(handle, "cat one.txt", user="root")).output == "one\n"
        assert (await SANDBOXES.capture_diff(handle)).diff == "", "the step ran before the baseline was recorded"
    finally:
        await SANDBOXES.destroy(handle)
    with (
        monkeypatch.context() as patched,
        pytest.raises(errors.SandboxError, match="workspace setup failed in .*/proc/no-home"),
    ):
        patched.setattr(lifecycle, "AGENT_HOME", "/proc/no-home")
        await boot(calc_task, "grading-missing")
    failing = calc_task.model_copy(update={"pre_commands": ["true", "echo about to fail; exit 3"]})
    with pytest.raises(errors.SandboxError, match=r"pre_commands\[1\] failed \(exit 3\)"):
        await boot(failing, "grading-failing")
    names = {f"{prefix}-grading-missing", f"{prefix}-grading-failing"}
    assert [c.name for c in await SANDBOXES.list_managed() if c.labels.get(WORKFLOW_LABEL) in names] == []


async def test_an_agent_sandbox_writes_its_files_in_the_baseline_exec_or_by_archive_when_too_long(prefix, calc_task):
    """The agent's config and problem statement are written by the exec that recorded the baseline (two execs, no
    archive, for a boot); a problem statement too long for an exec argument goes by archive, the same bytes."""
    counting = CountingSandboxes(SandboxSettings(lifetime_s=600))
    long_statement = "A long problem statement.\n" * (commands.MAX_ARGUMENT_BYTES // 20)
    for name, statement, calls in (
        ("short", calc_task.problem_statement, {"exec": 2}),
        ("long", long_statement, {"exec": 2, "archive written": 1}),
    ):
        task = calc_task.model_copy(update={"problem_statement": statement})
        counting.calls.clear()
        handle = await counting.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-agent-files-{name}", attempt=0))
        try:
            assert {kind: count for kind, count in counting.calls.items() if kind not in ("create",)} == calls
            written = await SANDBOXES.read_file(
                handle, f"{task.workdir}/{git_workspace.PROBLEM_STATEMENT_FILE}", 1 << 20
            )
            assert written.decode() == statement
            modes = await SANDBOXES.exec(
                handle, f"stat -c '%U %a' /home/agent/.claude.json {git_workspace.PROBLEM_STATEMENT_FILE}"
            )
            assert modes.output.split("\n")[:2] == ["agent 600", "agent 644"], modes.output
            assert (await SANDBOXES.capture_diff(handle)).diff == "", (
                "the problem statement is in neither the baseline nor the patch"
            )
        finally:
            await SANDBOXES.destroy(handle)


async def test_a_set_up_step_past_its_time_is_reported_by_its_label_and_stops_the_rest(prefix, calc_task):
    """The steps and the snapshot share one exec; each step keeps its own timeout, and the one that ran out is named."""
    handle = await fresh(prefix, calc_task, "steptimeout")
    try:
        steps = [
            ("pre_commands[0]", "touch first.txt"),
            ("pre_commands[1]", "sleep 30"),
            ("pre_commands[2]", "touch third.txt"),
        ]
        with pytest.raises(errors.SandboxError, match=r"pre_commands\[1\] failed \(timed out\): 'sleep 30'"):
            await SANDBOXES.record_baseline(handle, "agent", steps, step_timeout_s=1)
        listing = await SANDBOXES.exec(handle, "ls first.txt third.txt 2>&1; true")
        assert "first.txt" in listing.output and "cannot access 'third.txt'" in listing.output
    finally:
        await SANDBOXES.destroy(handle)


async def test_destroy_is_idempotent(prefix, calc_task):
    handle = await fresh(prefix, calc_task, "destroy")
    await SANDBOXES.destroy(handle)
    await SANDBOXES.destroy(handle)
    with pytest.raises(errors.SandboxGone):
        await SANDBOXES.exec(handle, "true")


async def test_reap_expired_removes_only_expired(prefix, booted, calc_task):
    labels = {
        f"{container_layout.LABEL_PREFIX}.managed": "1",
        WORKFLOW_LABEL: f"{prefix}-expired",
        f"{container_layout.LABEL_PREFIX}.expires_at": str(int(time.time()) - 5),
    }
    expired = docker.from_env().containers.create(calc_task.image, ["true"], labels=labels)
    removed = await SANDBOXES.reap_expired()
    assert expired.name in removed and booted.name not in removed
    names = {c.name for c in await SANDBOXES.list_managed()}
    assert booted.name in names and expired.name not in names
