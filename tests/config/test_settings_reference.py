"""The settings page is generated from ``durable_rollouts.config.settings_reference`` and cannot drift from the code:
every variable the code reads is listed, nothing else is, the page is the rendering, and the stated defaults are the
readers'."""

from __future__ import annotations

import ast
import re

from durable_rollouts.config.payload_store import payload_store_from_env
from durable_rollouts.config.settings import impossible_share_from_env, settings_from_env
from durable_rollouts.config.settings_reference import SETTINGS, render
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.slime_samples.options import sample_options
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env

NAME = re.compile(r"(?:ROLLOUT|SWE|SHIM|SLIME)_[A-Z0-9_]*[A-Z0-9]")
CODE = list(PROJECT_ROOT.glob("*.py")) + [
    path
    for folder in PROJECT_ROOT.iterdir()
    if (folder / "__init__.py").is_file() and folder.name != "tests"
    for path in folder.rglob("*.py")
]


def names_the_code_reads() -> set[str]:
    """Every string constant of the code (docstrings aside) that is a whole setting name."""
    found = set()
    for path in CODE:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                found.add(node.value)
    return found


def test_every_variable_the_code_reads_is_listed_and_nothing_else():
    listed = [setting.name for setting in SETTINGS]
    assert len(listed) == len(set(listed)), "one entry per variable"
    assert set(listed) == names_the_code_reads()


def test_the_settings_page_is_the_rendering():
    assert (PROJECT_ROOT / "docs" / "settings.md").read_text() == render(), (
        "run: python -m durable_rollouts.config.settings_reference > docs/settings.md"
    )


def test_the_stated_numeric_defaults_are_what_the_readers_return():
    stated = {setting.name: setting.default for setting in SETTINGS}
    worker = settings_from_env({})
    store = payload_store_from_env({})
    read = {
        "SWE_TIME_BUDGET_SEC": worker.budgets.agent_budget_s,
        "SWE_EVAL_TIMEOUT_SEC": worker.budgets.eval_timeout_s,
        "ROLLOUT_RESUME_WINDOW_S": worker.budgets.resume_window_s,
        "SHIM_PORT": worker.adapter_port,
        "ROLLOUT_FINISH_GRACE_S": worker.finish_grace_s,
        "ROLLOUT_REAP_INTERVAL_S": worker.reap_interval_s,
        "ROLLOUT_SERVER_WAIT_S": server_wait_from_env({}),
        "ROLLOUT_IMPOSSIBLE_SHARE": impossible_share_from_env({}),
        "SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS": sample_options(None, {}).fork_threshold,
        "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": store.threshold_bytes // 1024,
        "ROLLOUT_PAYLOAD_MAX_BYTES": store.max_bytes // (1 << 20),
    }
    for name, value in read.items():
        assert float(stated[name].split()[0]) == value, (
            f"{name}: the page says {stated[name]}, the reader returns {value}"
        )
    budgets = worker.budgets
    assert budgets.guard_s == budgets.agent_budget_s + budgets.eval_timeout_s + budgets.pull_timeout_s + 180
    assert stated["SWE_GENERATE_GUARD_SEC"] == "budget + eval + pull + 180"
