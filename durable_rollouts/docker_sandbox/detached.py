"""Detached commands: a named bash script run in the background of a container, re-attachable after a restart.

Files under ``git_workspace.HARNESS_DIR``: ``<name>.sh`` (the script), ``.out`` / ``.err`` (its output),
``.pid`` (its process group), ``.exit`` (its exit code, written atomically once it ends). A name runs at
most once per container.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.commands import MAX_ARGUMENT_BYTES, ContainerCommands, ExecResult
from durable_rollouts.docker_sandbox.container_layout import AGENT_USER, uid_of
from durable_rollouts.docker_sandbox.errors import DetachedLaunchFailed, SandboxError
from durable_rollouts.docker_sandbox.files import ContainerFiles, SandboxFile
from durable_rollouts.docker_sandbox.git_workspace import HARNESS_DIR
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The detached-command scripts take the harness directory and the name as $1 and $2.
_RUNNER = ShellScript("durable_rollouts.docker_sandbox", "sandbox_runner.sh")
_LAUNCH = ShellScript("durable_rollouts.docker_sandbox", "sandbox_launch.sh")
_STATUS = ShellScript("durable_rollouts.docker_sandbox", "sandbox_status.sh")
_WAIT = ShellScript("durable_rollouts.docker_sandbox", "sandbox_wait.sh")
_KILL = ShellScript("durable_rollouts.docker_sandbox", "sandbox_kill.sh")
_RUN = ShellScript("durable_rollouts.docker_sandbox", "sandbox_run.sh")
# The launch script waits at most this long for the runner to record its pid.
LAUNCH_S = 10.0


class DetachedStatus(BaseModel):
    """``started``: its pid is recorded; ``running``: its process group is alive; ``exit_code``: its exit marker."""

    started: bool
    running: bool
    exit_code: int | None = None


def _checked_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"detached command name {name!r} must match {_NAME.pattern}")
    return name


class DetachedCommands(ContainerCommands, ContainerFiles):
    async def start_detached(
        self, handle: SandboxHandle, name: str, cmd: str, *, user: str = AGENT_USER, env: dict[str, str] | None = None
    ) -> None:
        """Start ``cmd`` (a bash script, run as ``bash -l``) in the background in the workdir.

        Starting an already-started name raises ``DetachedLaunchFailed`` (re-attach with ``wait_detached``
        instead) and leaves the running command's files alone. One Docker round trip: the exec that
        checks the name writes the script and the runner (its arguments) and launches the runner; a
        script over ``MAX_ARGUMENT_BYTES`` is staged by an archive first (two round trips). ``cmd`` is an
        exec argument, so it holds no secret (those go in ``env``).
        """
        argv = await self._launch_argv(handle, _checked_name(name), cmd, user)
        result = await self.exec_in(
            handle.container_id,
            ["bash", "-c", _LAUNCH.text, "launch", *argv],
            user=user,
            cwd=handle.workdir,
            timeout_s=30,
            env=env,
        )
        if result.exit_code != 0:
            raise _launch_failed(handle, name, result.exit_code, result.output)

    async def run_detached(
        self,
        handle: SandboxHandle,
        name: str,
        cmd: str,
        timeout_s: float,
        *,
        user: str = AGENT_USER,
        env: dict[str, str] | None = None,
    ) -> int | None:
        """``start_detached`` then ``wait_detached`` in one round trip: ``cmd``'s exit code, or None once
        ``timeout_s`` has passed (the command keeps running: stop it with ``kill_detached``). A launch that
        fails raises ``DetachedLaunchFailed`` as ``start_detached`` does, a wait that fails ``SandboxError`` as
        ``wait_detached`` does; cancelling the awaiting task is as for ``wait_detached``."""
        argv = await self._launch_argv(handle, _checked_name(name), cmd, user)
        script = ["bash", "-c", _RUN.text, "run", _LAUNCH.text, _WAIT.text, *argv]
        result = await self.exec_in(
            handle.container_id, script, user=user, cwd=handle.workdir, timeout_s=timeout_s + LAUNCH_S, env=env
        )
        if result.exit_code > 100 and not result.timed_out:
            raise _launch_failed(handle, name, result.exit_code - 100, result.output)
        return _waited(handle, name, result)

    async def _launch_argv(self, handle: SandboxHandle, name: str, cmd: str, user: str) -> list[str]:
        """The launch script's arguments for ``cmd``: the script inline, or staged by an archive when it is too long."""
        argv = [HARNESS_DIR, name, _RUNNER.text]
        if len(cmd.encode()) <= MAX_ARGUMENT_BYTES:
            return [*argv, cmd]
        await self.write_files(
            handle, [SandboxFile(git_workspace.harness_file(f"{name}.sh.new"), cmd, uid_of(user), 0o755)]
        )
        return argv

    async def detached_status(self, handle: SandboxHandle, name: str) -> DetachedStatus:
        result = await self.run_script(handle, _STATUS, HARNESS_DIR, _checked_name(name))
        word, _, value = result.output.strip().partition(" ")
        if word == "none":
            return DetachedStatus(started=False, running=False)
        if word == "exit":
            return DetachedStatus(started=True, running=False, exit_code=int(value))
        return DetachedStatus(started=True, running=word == "running")

    async def wait_detached(self, handle: SandboxHandle, name: str, timeout_s: float) -> int | None:
        """The exit code of ``name`` once it ends (at once if it already has), or None after ``timeout_s``.

        One blocking ``docker exec`` polls the exit marker every 0.2 s. Cancelling the awaiting task
        kills that client; the in-container poll then ends at its own ``timeout``, so long waits are
        best done in slices.
        """
        result = await self.run_script(handle, _WAIT, HARNESS_DIR, _checked_name(name), timeout_s=timeout_s)
        return _waited(handle, name, result)

    async def kill_detached(self, handle: SandboxHandle, name: str) -> None:
        """TERM the command's process group, KILL it after 5 s; the runner then records 143 or 137."""
        await self.run_script(handle, _KILL, HARNESS_DIR, _checked_name(name))


def _launch_failed(handle: SandboxHandle, name: str, code: int, output: str) -> DetachedLaunchFailed:
    if code == 5:
        return DetachedLaunchFailed(f"detached command {name} already started in {handle.name}")
    return DetachedLaunchFailed(f"could not start {name} in {handle.name}: {output.strip()}")


def _waited(handle: SandboxHandle, name: str, result: ExecResult) -> int | None:
    """The exit code a run of the wait script printed; None when it timed out."""
    if result.timed_out:
        return None
    if result.exit_code == 3:
        raise SandboxError(f"detached command {name} was never started in {handle.name}")
    if result.exit_code == 4:
        raise SandboxError(f"detached command {name} in {handle.name} lost its runner before exiting")
    if result.exit_code != 0 or not result.output.strip().lstrip("-").isdigit():
        raise SandboxError(f"waiting for {name} in {handle.name} was interrupted: {result.output.strip()[:200]!r}")
    return int(result.output.strip())
