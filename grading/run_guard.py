"""How a grading run is set up so the code under test cannot reconfigure the test runner, and what it reports.

Invariants:

* ``install`` runs after the diff applied and the protected paths were reset. In a sandbox with Python it
  writes the grader's pytest plugin (``sandbox_scripts/pytest_guard.py``) under a module name drawn fresh
  for this grading, in a fresh directory outside the workdir that also receives the reports, and the same
  module into every probed interpreter's site-packages (``PythonEnvs.site_dirs``: a row's command that sets
  ``PYTHONPATH`` itself still imports it); the names of
  the two canaries and the failing one's message are drawn fresh too. Nothing the agent wrote can name
  any of them in advance.
* ``Guard.prelude`` is shell text a grader puts before its command: the plugin's directory goes first on
  ``PYTHONPATH``, the plugin first in ``PYTEST_PLUGINS`` (the image's own values kept after them),
  ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (the plugin loads the baseline's plugins itself,
  ``PythonEnvs.plugins``), and ``PYTHONSAFEPATH=1`` when ``PythonEnvs.safe_path`` allows it and the
  grader runs the row's own test command (not the ``swebench`` package's eval script, whose build steps
  import from the script's directory). A sandbox without Python gets an empty prelude.
* ``reports`` reads what the plugin wrote, one JUnit XML file per pytest process, at most
  ``MAX_REPORTS`` of at most ``REPORT_BYTES`` each (``session_reports``).
"""

from __future__ import annotations

import json
import secrets
import shlex
from dataclasses import dataclass, replace

from contracts.rollout import GraderKind, SandboxHandle
from docker_sandbox.files import SandboxFile
from docker_sandbox.sandboxes import DockerSandboxes
from docker_sandbox.shell_scripts import ShellScript
from grading import session_reports
from grading.python_envs import PythonEnvs
from grading.session_reports import SessionReport

MAX_REPORTS = 64
REPORT_BYTES = 16 << 20
LIST_TIMEOUT_S = 60.0
_PLUGIN = ShellScript("grading", "sandbox_scripts/pytest_guard.py")
_CONFIG_LINE = 'CONFIG = {"report_dir": "", "must_fail": "", "must_pass": "", "secret": "", "plugins": [], "max_modules": 16}'
# Graders whose eval script is not the row's own test command (see the module docstring).
_NO_SAFE_PATH: frozenset[GraderKind] = frozenset({"swebench"})


@dataclass(frozen=True)
class Guard:
    """One grading run's plugin: where it and its reports live, and the canaries' names."""

    directory: str = ""
    module: str = ""
    must_fail: str = ""
    must_pass: str = ""
    prelude: str = ""

    @property
    def active(self) -> bool:
        return bool(self.module)

    @property
    def report_dir(self) -> str:
        return f"{self.directory}/reports"


def _token() -> str:
    return secrets.token_hex(8)


def plugin_text(guard: Guard, envs: PythonEnvs, secret: str) -> str:
    """The plugin's source for ``guard``: its CONFIG filled in (report directory, canaries, baseline plugins)."""
    config = {
        "report_dir": guard.report_dir,
        "must_fail": guard.must_fail,
        "must_pass": guard.must_pass,
        "secret": secret,
        "plugins": [[plugin.distribution, plugin.name, plugin.value] for plugin in envs.plugins],
        "max_modules": 16,
    }
    text = _PLUGIN.text
    if _CONFIG_LINE not in text:
        raise RuntimeError("sandbox_scripts/pytest_guard.py: its CONFIG line changed; update run_guard._CONFIG_LINE")
    return text.replace(_CONFIG_LINE, f"CONFIG = {json.dumps(config)}")


def _prelude(guard: Guard, safe_path: bool) -> str:
    lines = [
        f'export PYTHONPATH={shlex.quote(guard.directory)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
        f'export PYTEST_PLUGINS={shlex.quote(guard.module)}"${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"',
        "export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
    ]
    if safe_path:
        lines.append("export PYTHONSAFEPATH=1")
    return "\n".join(lines) + "\n"


async def install(sandboxes: DockerSandboxes, handle: SandboxHandle, envs: PythonEnvs, grader: GraderKind) -> Guard:
    """Write this grading's plugin and report directory; an inactive ``Guard`` when the sandbox has no Python."""
    if not envs.found:
        return Guard()
    directory = f"/tmp/{_token()}"
    guard = Guard(directory=directory, module=f"m{_token()}", must_fail=f"test_{_token()}", must_pass=f"test_{_token()}")
    guard = replace(guard, prelude=_prelude(guard, envs.safe_path and grader not in _NO_SAFE_PATH))
    plugin = plugin_text(guard, envs, f"canary {_token()}")
    homes = [directory, *envs.site_dirs]
    files = [SandboxFile(f"{home}/{guard.module}.py", plugin) for home in homes]
    await sandboxes.write_files(handle, [*files, SandboxFile(f"{guard.report_dir}/.keep", "")])
    return guard


async def reports(sandboxes: DockerSandboxes, handle: SandboxHandle, guard: Guard) -> list[SessionReport]:
    """The plugin's reports of this grading run, in the order the processes wrote them."""
    if not guard.active:
        return []
    listing = await sandboxes.exec(
        handle, f"ls -1tr {shlex.quote(guard.report_dir)} | grep '\\.xml$' | head -n {MAX_REPORTS}; true", user="root", timeout_s=LIST_TIMEOUT_S
    )
    found = []
    for name in listing.output.split():
        if not name.endswith(".xml"):
            continue
        try:
            data = await sandboxes.read_file(handle, f"{guard.report_dir}/{name}", REPORT_BYTES)
        except (FileNotFoundError, IsADirectoryError):
            continue
        found.append(session_reports.parse(name, data, guard))
    return found
