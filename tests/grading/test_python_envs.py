"""What a grading reads of its sandbox's Pythons on the real engine: the probe, asked once per image, environment
and set-up (remembered for the next sandbox booted alike, asked again when the set-up changes what the Pythons
see), and the guard's reports, read in one round trip."""

from __future__ import annotations

from collections import Counter

import pytest

from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.files import SandboxFile
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.grading import python_envs, run_guard
from durable_rollouts.grading.python_envs import PythonEnvs
from testbed.call_counts import CountingSandboxes

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# Puts the workdir's vendor/ on every start-up's sys.path through a .pth file in the image's site-packages.
VENDOR_ON_PATH = (
    'mkdir -p vendor && echo "$PWD/vendor" > "$(python3 -c \'import sysconfig; '
    'print(sysconfig.get_paths()["purelib"])\')/zz_vendor.pth"'
)


def counting_sandboxes() -> CountingSandboxes:
    return CountingSandboxes(SandboxSettings(lifetime_s=600))


async def probed(sandboxes: CountingSandboxes, task: TaskSpec, workflow_id: str) -> tuple[PythonEnvs, Counter[str]]:
    """The probe's answer in a fresh grading sandbox of ``task``, and the engine calls the probe made there."""
    handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=0, purpose="grading"))
    try:
        before = sandboxes.calls.copy()
        envs = await python_envs.probe(sandboxes, handle, task)
        return envs, sandboxes.calls - before
    finally:
        await sandboxes.destroy(handle)


async def test_a_probe_is_remembered_for_sandboxes_booted_alike_and_asked_again_when_the_set_up_differs(prefix, tasks):
    sandboxes = counting_sandboxes()
    task = tasks["calc-eval-cmd"].model_copy(update={"pre_commands": ["true"]})
    first, first_calls = await probed(sandboxes, task, f"{prefix}-first")
    again, again_calls = await probed(sandboxes, task, f"{prefix}-again")
    assert first.found and "." in first.import_roots and "vendor" not in first.import_roots
    assert first_calls == Counter({"archive written": 1, "exec": 1}), "the probe script written, then run"
    assert again_calls == Counter(), "the second sandbox of the same image and set-up is answered from memory"
    assert again == first

    vendored = task.model_copy(update={"pre_commands": [VENDOR_ON_PATH]})
    changed, changed_calls = await probed(sandboxes, vendored, f"{prefix}-vendored")
    assert changed_calls == first_calls, "another set-up is probed afresh"
    assert "vendor" in changed.import_roots, "the .pth file the set-up wrote puts vendor/ among the import roots"


async def test_reports_are_the_xml_files_directly_in_the_report_directory_and_too_many_is_a_problem(prefix, tasks):
    sandboxes = counting_sandboxes()
    task = tasks["calc-eval-cmd"]
    handle = await sandboxes.boot(
        SandboxRequest(task=task, workflow_id=f"{prefix}-reports", attempt=0, purpose="grading")
    )
    try:
        guard, files = run_guard.prepare(await python_envs.probe(sandboxes, handle, task), handle.workdir)
        nested = SandboxFile(f"{guard.report_dir}/deeper/1.xml", "<not-read/>")
        await sandboxes.write_files(
            handle, [*files, nested, SandboxFile(f"{guard.report_dir}/notes.txt", "not a report")]
        )
        assert await run_guard.reports(sandboxes, handle, guard) == []

        one = [SandboxFile(f"{guard.report_dir}/7.xml", "<testsuites/>")]
        await sandboxes.write_files(handle, one)
        [report] = await run_guard.reports(sandboxes, handle, guard)
        assert report.name == "7.xml" and report.problem, (
            "a report without the plugin's session record is a problem, read from the one file"
        )

        flood = [
            SandboxFile(f"{guard.report_dir}/{n}.xml", "<testsuites/>") for n in range(100, 100 + run_guard.MAX_REPORTS)
        ]
        await sandboxes.write_files(handle, flood)
        [too_many] = await run_guard.reports(sandboxes, handle, guard)
        assert too_many.name == "reports" and f"more than {run_guard.MAX_REPORTS} report files" in too_many.problem
    finally:
        await sandboxes.destroy(handle)
