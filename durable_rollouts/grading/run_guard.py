"""How a grading run is set up so the code under test cannot reconfigure the test runner, and what it reports.

Invariants:

* ``prepare`` gives the guard of one grading and its files, written before the diff applies (with the patch,
  one write), all outside the workdir, where neither the diff nor the reset of the protected paths reaches.
  In a sandbox with Python they are the grader's pytest plugin (``sandbox_scripts/pytest_guard.py``) under a module name
  drawn fresh for this grading, in a fresh directory outside the workdir that also receives the reports, and the same
  module into every probed interpreter's site-packages (``PythonEnvs.site_dirs``: a row's command that sets
  ``PYTHONPATH`` itself still imports it); the names of the two canaries and the failing one's message are drawn fresh
  too. Nothing the agent wrote can name any of them in advance.
* ``Guard.prelude`` is shell text a grader puts before its command: the report directory opened to every
  user (a row's tests may run as another one), the plugin's directory first on ``PYTHONPATH``, the plugin
  first in ``PYTEST_PLUGINS`` (the image's own values kept after them) and
  ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (the plugin loads the plugins auto-loading would have, except the
  workdir's). A sandbox without Python gets an empty prelude.
* ``reports`` reads what the plugin wrote, one JUnit XML file per pytest process, at most
  ``MAX_REPORTS`` of at most ``REPORT_BYTES`` each (``session_reports``); more files than that is itself
  reported, as a report with a ``problem``.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shlex
from dataclasses import dataclass

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.files import SandboxFile, TooManyFiles
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript
from durable_rollouts.grading import session_reports
from durable_rollouts.grading.python_envs import PythonEnvs
from durable_rollouts.grading.session_reports import SessionReport

MAX_REPORTS = 64
REPORT_BYTES = 64 << 20
MAX_CANARY_MODULES = 16
_PLUGIN = ShellScript("durable_rollouts.grading", "sandbox_scripts/pytest_guard.py")
_CONFIG_LINE = re.compile(r"^CONFIG = \{.*\}$", re.MULTILINE)


@dataclass(frozen=True)
class Guard:
    """One grading run's plugin: where it and its reports live, and the canaries' names."""

    directory: str = ""
    module: str = ""
    must_fail: str = ""
    must_pass: str = ""

    @property
    def active(self) -> bool:
        return bool(self.module)

    @property
    def report_dir(self) -> str:
        return f"{self.directory}/reports"

    @property
    def prelude(self) -> str:
        """The shell lines a grader runs before its command (see the module docstring); "" when inactive."""
        if not self.active:
            return ""
        return "\n".join(
            [
                f"chmod 0777 {shlex.quote(self.report_dir)}",
                f'export PYTHONPATH={shlex.quote(self.directory)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
                f'export PYTEST_PLUGINS={shlex.quote(self.module)}"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"',
                "export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
                "",
            ]
        )


def _token() -> str:
    return secrets.token_hex(8)


def plugin_text(guard: Guard, envs: PythonEnvs, secret: str, workdir: str) -> str:
    """The plugin's source for ``guard``: its CONFIG filled in (report directory, workdir, canaries, baseline
    plugins)."""
    config = {
        "report_dir": guard.report_dir,
        "workdir": workdir,
        "must_fail": guard.must_fail,
        "must_pass": guard.must_pass,
        "secret": secret,
        "plugins": [[plugin.distribution, plugin.name, plugin.value] for plugin in envs.plugins],
        "max_modules": MAX_CANARY_MODULES,
    }
    text, replaced = _CONFIG_LINE.subn(lambda _: f"CONFIG = {json.dumps(config)}", _PLUGIN.text, count=1)
    if replaced != 1:
        raise RuntimeError("sandbox_scripts/pytest_guard.py has no one-line CONFIG = {...} for the grader to fill")
    return text


def prepare(envs: PythonEnvs, workdir: str) -> tuple[Guard, list[SandboxFile]]:
    """This grading's guard and the files that install it (its plugin and report directory); an inactive
    ``Guard`` and no files when the sandbox has no Python."""
    if not envs.found:
        return Guard(), []
    directory = f"/tmp/{_token()}"
    guard = Guard(
        directory=directory, module=f"m{_token()}", must_fail=f"test_{_token()}", must_pass=f"test_{_token()}"
    )
    plugin = plugin_text(guard, envs, _token(), workdir)
    homes = [directory, *envs.site_dirs]
    files = [SandboxFile(f"{home}/{guard.module}.py", plugin) for home in homes]
    return guard, [*files, SandboxFile(f"{guard.report_dir}/.keep", "")]


async def reports(sandboxes: DockerSandboxes, handle: SandboxHandle, guard: Guard) -> list[SessionReport]:
    """The plugin's reports of this grading run, by file name."""
    if not guard.active:
        return []
    too_many = [
        SessionReport(name="reports", problem=f"more than {MAX_REPORTS} report files in the grader's report directory")
    ]
    try:  # one round trip; the directory's own .keep is the one file besides the reports
        files = await sandboxes.read_directory(handle, guard.report_dir, REPORT_BYTES, max_files=MAX_REPORTS + 1)
    except FileNotFoundError:
        return []
    except TooManyFiles:
        return too_many
    names = sorted(name for name in files if name.endswith(".xml"))
    if len(names) > MAX_REPORTS:
        return too_many
    return [
        await asyncio.to_thread(session_reports.parse, name, files[name], guard) for name in names
    ]  # XML parsed off the event loop
