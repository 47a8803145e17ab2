"""A Harbor task's image on the real engine: built once from ``environment/``, reused while it is unchanged,
rebuilt (under a new tag) when it changes."""

from __future__ import annotations

import uuid

import pytest

from durable_rollouts.task_sources.harbor_images import (
    HASH_LABEL,
    HarborImages,
    ImageProblem,
    environment_hash,
    image_tag,
)


@pytest.fixture
def name(engine):
    """A task name of this test's own; every image tagged for it is removed afterwards."""
    value = f"pytest/images-{uuid.uuid4().hex[:8]}"
    yield value
    for image in engine.images.list(filters={"reference": f"harbor-{value.replace('/', '-')}"}):
        for tag in image.tags:
            engine.images.remove(tag, force=True)


def test_an_environment_is_built_once_and_reused_until_it_changes(tmp_path, engine, name):
    environment = tmp_path / "environment"
    (environment / "app").mkdir(parents=True)
    (environment / "Dockerfile").write_text(
        "FROM rollout-base:bookworm\nWORKDIR /srv/app\nCOPY app/ /srv/app/\nRUN date +%s%N >/built-at\n"
    )
    (environment / "app" / "main.py").write_text("print('v1')\n")
    images = HarborImages(engine)

    first = images.resolve(name, environment, None, 120)
    assert first.built and first.workdir == "/srv/app"
    assert (
        first.image
        == f"harbor-{name.replace('/', '-')}:{environment_hash(environment)}"
        == image_tag(name, environment)
    )
    built = engine.images.get(first.image)
    assert built.labels[HASH_LABEL] == environment_hash(environment)

    again = images.resolve(name, environment, None, 120)
    assert (again.image, again.built) == (first.image, False)
    assert engine.images.get(again.image).id == built.id, "unchanged: the same image, not rebuilt"

    (environment / "app" / "main.py").chmod(0o755)
    changed = images.resolve(name, environment, None, 120)
    assert changed.built and changed.image != first.image, "the executable bit is part of the environment"
    (environment / "app" / "main.py").write_text("print('v2')\n")
    edited = images.resolve(name, environment, None, 120)
    assert edited.built and edited.image not in (first.image, changed.image)
    output = engine.containers.run(
        edited.image, ["cat", "/srv/app/main.py"], remove=True, labels={"io.rollouts.managed": "1"}
    )
    assert output == b"print('v2')\n"


def test_a_build_that_needs_a_registry_fails_with_its_log(tmp_path, engine, name):
    """``pull=False``: a base image the engine lacks is not fetched, the build fails and says why."""
    environment = tmp_path / "environment"
    environment.mkdir()
    (environment / "Dockerfile").write_text("FROM pytest-no-such-base-image:never\nWORKDIR /app\n")
    with pytest.raises(ImageProblem) as caught:
        HarborImages(engine).resolve(name, environment, None, 60)
    assert caught.value.field == "environment/Dockerfile"
    assert caught.value.reason.startswith("the build failed: ") and "pytest-no-such-base-image" in caught.value.reason
    assert engine.images.list(filters={"reference": f"harbor-{name.replace('/', '-')}"}) == []
