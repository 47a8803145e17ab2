"""Image names as Docker resolves them, and the mirror rewrite, including the names the SWE-* row shapes publish."""

from __future__ import annotations

import pytest

from durable_rollouts.docker_sandbox.image_refs import (
    ImageReferenceError,
    canonical,
    parse_mirror_rules,
    registry_of,
    rewrite,
)
from durable_rollouts.task_sources.row_shapes import swe_gym, swe_rebench, swe_smith
from durable_rollouts.task_sources.row_shapes.swebench_family import eval_image


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("ubuntu", "docker.io/library/ubuntu:latest"),
        ("rollout-task-calc-eval-cmd:latest", "docker.io/library/rollout-task-calc-eval-cmd:latest"),
        (
            "swebench/sweb.eval.x86_64.django_1776_django-11099",
            "docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
        ),
        ("index.docker.io/swebench/x:v2", "docker.io/swebench/x:v2"),
        ("127.0.0.1:5055/probe/calc:1", "127.0.0.1:5055/probe/calc:1"),
        ("localhost/a/b", "localhost/a/b:latest"),
        ("ghcr.io/org/img@sha256:" + "a" * 64, "ghcr.io/org/img@sha256:" + "a" * 64),
    ],
)
def test_canonical_is_what_docker_resolves_a_name_to(name, full):
    assert canonical(name) == full
    assert canonical(full) == full


def test_the_registry_of_a_name():
    assert [registry_of(n) for n in ("ubuntu", "mirror.local:5000/x", "localhost/x", "org/x")] == [
        "docker.io",
        "mirror.local:5000",
        "localhost",
        "docker.io",
    ]


@pytest.mark.parametrize("name", ["", "Not A Valid Reference!", "UPPER/case"])
def test_a_string_that_is_no_reference_is_refused(name):
    with pytest.raises(ImageReferenceError, match="not an image reference"):
        canonical(name)


def test_mirror_rules_match_whole_segments_and_the_first_rule_wins():
    rules = parse_mirror_rules(
        "swebench=mirror.local:5000/swebench, docker.io=mirror.local:5000/hub, docker.io/library=127.0.0.1:5055"
    )
    assert [(r.source, r.target) for r in rules] == [
        ("docker.io/swebench", "mirror.local:5000/swebench"),
        ("docker.io", "mirror.local:5000/hub"),
        ("docker.io/library", "127.0.0.1:5055"),
    ]
    assert (
        rewrite("swebench/sweb.eval.x86_64.a_1776_b-1", rules)
        == "mirror.local:5000/swebench/sweb.eval.x86_64.a_1776_b-1:latest"
    )
    assert rewrite("swebench2/x", rules) == "mirror.local:5000/hub/swebench2/x:latest", (
        "swebench2 is not under swebench"
    )
    assert rewrite("rollout-task-calc:latest", rules[2:]) == "127.0.0.1:5055/rollout-task-calc:latest"
    assert rewrite("ghcr.io/org/img:1", rules) == "ghcr.io/org/img:1", "no rule: the name as written"
    assert rewrite("anything", []) == "anything"


@pytest.mark.parametrize("text", ["swebench", "a=b,c", "a= b c"])
def test_a_malformed_mirror_rule_names_its_place(text):
    with pytest.raises(ValueError, match=r"rule \d|mirror prefix"):
        parse_mirror_rules(text)


def test_the_swe_row_shapes_names_pull_through_a_mirror_of_their_namespaces():
    """SWE-bench, SWE-Gym, SWE-rebench and SWE-smith publish on Docker Hub under their own namespaces; one
    rule per namespace sends every row's image to a pull-through mirror."""
    rules = parse_mirror_rules(
        ",".join(
            f"{ns}=mirror.local:5000/{ns}"
            for ns in ("swebench", swe_gym.NAMESPACE, swe_rebench.NAMESPACE, swe_smith.IMAGE_NAMESPACE)
        )
    )
    names = [
        eval_image("swebench", "django__django-11099", "_1776_"),
        eval_image(swe_gym.NAMESPACE, "getmoto__moto-7365", "_s_"),
        eval_image(swe_rebench.NAMESPACE, "pandas-dev__pandas-1", "_1776_"),
        swe_smith.image(
            {
                "repo": "swesmith/pylint-dev__astroid.b114f6b5",
                "instance_id": "pylint-dev__astroid.b114f6b5.combine_file__1",
            }
        ),
    ]
    assert [rewrite(name, rules) for name in names] == [
        "mirror.local:5000/swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
        "mirror.local:5000/xingyaoww/sweb.eval.x86_64.getmoto_s_moto-7365:latest",
        "mirror.local:5000/swerebench/sweb.eval.x86_64.pandas-dev_1776_pandas-1:latest",
        "mirror.local:5000/swebench/swesmith.x86_64.pylint-dev_1776_astroid.b114f6b5:latest",
    ]
