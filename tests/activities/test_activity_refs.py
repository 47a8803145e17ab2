"""The typed activity boundary: what the workflows schedule is what ``worker.py`` registers, and the
workflow modules stay light."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

from temporalio import activity

import worker
from activities import activity_refs
from activities.adapter import AdapterActivities
from activities.drift_repair import DriftEpisodeActivities
from activities.evaluate import GradingActivities
from activities.rollout_host import RolloutHost
from activities.sandbox import SandboxActivities
from durable_rollouts.paths import PROJECT_ROOT
from workflows import coding_agent_rollout, drift_repair_episode, image_prefetch, regrade_rollout

ROOT = PROJECT_ROOT
WORKFLOW_MODULES = (coding_agent_rollout, drift_repair_episode, image_prefetch, regrade_rollout)


def signature(fn) -> tuple[str | None, tuple[type, ...] | None, type | None]:
    """Name, argument types and result type, as the SDK reads them (``self`` left out of methods)."""
    defn = activity._Definition.must_from_callable(fn)
    return defn.name, None if defn.arg_types is None else tuple(defn.arg_types), defn.ret_type


def scheduled_refs() -> set[str]:
    """The ``refs.<name>`` attributes the workflow modules use."""
    names = set()
    for module in WORKFLOW_MODULES:
        tree = ast.parse(inspect.getsource(module))
        names |= {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "refs"
        }
    return names


def test_every_scheduled_activity_is_registered_with_the_same_name_and_types():
    lists = worker.activity_lists(
        RolloutHost, AdapterActivities, DriftEpisodeActivities, SandboxActivities, GradingActivities
    )
    registered = {signature(fn)[0]: signature(fn) for fn in [*lists.shared, *lists.pinned]}
    used = scheduled_refs()
    assert used, "the workflows schedule through activity_refs"
    for name in used:
        ref = getattr(activity_refs, name)
        assert ref in activity_refs.WORKFLOW_ACTIVITIES
        assert signature(ref) == registered.get(activity_refs.name_of(ref)), name


def test_every_reference_is_scheduled_and_registered():
    lists = worker.activity_lists(
        RolloutHost, AdapterActivities, DriftEpisodeActivities, SandboxActivities, GradingActivities
    )
    registered = {signature(fn) for fn in [*lists.shared, *lists.pinned]}
    assert {activity_refs.name_of(ref) for ref in activity_refs.WORKFLOW_ACTIVITIES} == scheduled_refs()
    assert {signature(ref) for ref in activity_refs.WORKFLOW_ACTIVITIES} == registered


def test_workflows_schedule_no_activity_by_a_string_literal():
    for module in WORKFLOW_MODULES:
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("execute_activity", "start_activity")
            ):
                assert node.args and not isinstance(node.args[0], ast.Constant), ast.unparse(node)


def test_workflow_modules_import_no_docker_aiohttp_or_transformers():
    probe = (
        "import sys, workflows.coding_agent_rollout, workflows.drift_repair_episode, workflows.regrade_rollout;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'aiohttp', 'transformers')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
