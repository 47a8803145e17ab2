"""Task images pulled from a real registry (Debian's docker-registry with htpasswd auth, on loopback) into the
real engine at boot: once per host for every waiting boot, with progress, under each pull policy, and the
three failures told apart (not in the registry, credentials refused, registry unreachable or gone mid-pull).

The module builds one image of its own (the calc task's image plus a random 8 MB layer, so a pull moves real
bytes), pushes it and removes it from the engine; every image it pulled is removed at teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import docker
import docker.errors
import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import sandbox as sandbox_faces
from durable_rollouts.contracts.sandboxes import ImagePull, SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.errors import RegistryAuthFailed, RegistryUnavailable, SandboxImageMissing
from durable_rollouts.docker_sandbox.image_metrics import ImageMetrics
from durable_rollouts.docker_sandbox.image_pull import ImagePuller, PullTracker, classify_pull_error
from durable_rollouts.docker_sandbox.image_refs import parse_mirror_rules
from durable_rollouts.docker_sandbox.image_settings import ImageSettings, RegistryCredentials
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from testbed.local_registry import LocalRegistry, ThrottledFront, build_with_random_layer, image_present

BLOB_BYTES = 8 << 20


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("manifest for r:5000/a:nope not found: manifest unknown: manifest unknown", SandboxImageMissing),
        (
            "pull access denied for nothing, repository does not exist or may require 'docker login'",
            SandboxImageMissing,
        ),
        ("unauthorized: authentication required", RegistryAuthFailed),
        ('Head "http://r:5000/v2/a/manifests/1": no basic auth credentials', RegistryAuthFailed),
        ('Get "http://r:5000/v2/": dial tcp r:5000: connect: connection refused', RegistryUnavailable),
        ("received unexpected HTTP status: 503 Service Unavailable", RegistryUnavailable),
    ],
)
def test_a_failed_pull_is_one_of_three(message, kind):
    error = classify_pull_error("r:5000/a:1", message)
    assert isinstance(error, kind) and "r:5000" in str(error) and message in str(error)


def test_the_tracker_counts_layers_once_and_bytes_by_their_largest_report():
    tracker = PullTracker("r/a:1")
    for event in [
        {"status": "Pulling from a", "id": "1"},
        {"status": "Already exists", "id": "l1"},
        {"status": "Pulling fs layer", "id": "l2"},
        {"status": "Downloading", "id": "l2", "progressDetail": {"current": 100, "total": 1000}},
        {"status": "Downloading", "id": "l2", "progressDetail": {"current": 600, "total": 1000}},
        {"status": "Download complete", "id": "l2"},
        {"status": "Extracting", "id": "l2", "progressDetail": {"current": 50, "total": 1000}},
    ]:
        tracker.feed(event)
    assert tracker.snapshot().model_dump(exclude={"seconds", "attempt"}) == {
        "image": "r/a:1",
        "layers_total": 2,
        "layers_done": 1,
        "bytes_done": 1000,
        "bytes_total": 1000,
    }
    tracker.feed({"status": "Pull complete", "id": "l2"})
    assert tracker.snapshot().layers_done == 2


class Images:
    """The module's registry and the name of its pushed image (``probe/calc:<tag>``)."""

    def __init__(self, registry: LocalRegistry, repository: str, tag: str, calc: TaskSpec):
        self.registry, self.repository, self.tag, self.calc = registry, repository, tag, calc

    @property
    def credentials(self) -> RegistryCredentials:
        return RegistryCredentials(
            registry=self.registry.address, username=self.registry.username, password=self.registry.password
        )

    def remote(self, address: str | None = None, tag: str | None = None) -> str:
        return f"{address or self.registry.address}/{self.repository}:{tag or self.tag}"

    def task(self, image: str) -> TaskSpec:
        return self.calc.model_copy(update={"image": image, "instance_id": f"pull-{uuid.uuid4().hex[:6]}"})


def _forget(client: docker.DockerClient, name: str) -> None:
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(name, force=True)


async def push_new_image(
    client: docker.DockerClient, registry: LocalRegistry, base: str, name: str, blob_bytes: int = BLOB_BYTES
) -> None:
    """Build ``base`` plus a random layer of ``blob_bytes``, push it to ``registry`` as ``name``, and remove it
    from the engine (its random layer with it)."""
    local = await asyncio.to_thread(build_with_random_layer, client, base, blob_bytes)
    try:
        await asyncio.to_thread(registry.push, client, local, name)
    finally:
        _forget(client, local)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def images(task_images, tasks, tmp_path_factory):
    client = docker.from_env()
    registry = LocalRegistry(tmp_path_factory.mktemp("registry"))
    registry.start()
    tag = uuid.uuid4().hex[:10]
    calc = tasks["calc-eval-cmd"]
    pulled: list[str] = []
    try:
        await push_new_image(client, registry, calc.image, f"probe/calc:{tag}")
        yield Images(registry, "probe/calc", tag, calc), pulled
    finally:
        registry.stop()
        for name in pulled:
            _forget(client, name)


def sandboxes_with(settings: ImageSettings) -> DockerSandboxes:
    return DockerSandboxes(SandboxSettings(lifetime_s=600, images=settings))


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_waiting_boots_share_one_pull_through_the_mirror_and_see_its_progress(images, reap_prefix):
    """Three boots of a row that names ``pulltest/calc:<tag>`` on Docker Hub, with a mirror rule sending
    ``docker.io/pulltest`` to the registry: one pull serves all three, its progress reaches each, and a
    later boot finds the image in place (no further request to the registry)."""
    found, pulled = images
    rules = parse_mirror_rules(f"docker.io/pulltest={found.registry.address}/probe")
    sandboxes = sandboxes_with(ImageSettings(mirrors=rules, credentials=found.credentials))
    pulled.append(found.remote())
    task = found.task(f"pulltest/calc:{found.tag}")
    prefix = f"pytest-pull-{uuid.uuid4().hex[:6]}"
    heard: list[list[ImagePull]] = [[], [], []]
    _forget(docker.from_env(), found.remote())
    fetched_before = found.registry.manifest_requests(found.repository)
    try:
        handles = await asyncio.gather(
            *(
                sandboxes.boot(
                    SandboxRequest(task=task, workflow_id=f"{prefix}-{i}", attempt=0), on_pull=heard[i].append
                )
                for i in range(3)
            )
        )
        assert len({h.container_id for h in handles}) == 3
        assert found.registry.manifest_requests(found.repository) == fetched_before + 1, (
            "one pull (one manifest fetched) for three boots"
        )
        asked = found.registry.manifest_requests(found.repository, ("GET", "HEAD"))
        assert all(progress for progress in heard), "every waiting boot heard the pull's progress"
        last = max((p for progress in heard for p in progress), key=lambda p: p.bytes_done)
        assert last.image == found.remote() and last.bytes_done >= BLOB_BYTES // 2 and last.layers_total >= 1
        again = await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-again", attempt=0))
        assert found.registry.manifest_requests(found.repository, ("GET", "HEAD")) == asked, (
            "the image was in place: no request"
        )
        assert (await sandboxes.exec(again, "stat -c %s /opt/random-layer")).output.strip() == str(BLOB_BYTES)
    finally:
        await reap_prefix(prefix)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_pull_failures_are_told_apart_and_typed_for_the_workflow(images, reap_prefix):
    found, _ = images
    prefix = f"pytest-pullfail-{uuid.uuid4().hex[:6]}"
    wrong = RegistryCredentials(registry=found.registry.address, username=found.registry.username, password="wrong")
    cases = [
        (ImageSettings(credentials=wrong), found.remote(), RegistryAuthFailed, "RegistryAuthFailed", False),
        (
            ImageSettings(credentials=found.credentials),
            found.remote(tag="no-such-tag"),
            SandboxImageMissing,
            "SandboxImageMissing",
            False,
        ),
        (
            ImageSettings(credentials=found.credentials),
            f"127.0.0.1:1/{found.repository}:{found.tag}",
            RegistryUnavailable,
            "RegistryUnavailable",
            True,
        ),
        (
            ImageSettings(pull_policy="never", credentials=found.credentials),
            found.remote(),
            SandboxImageMissing,
            "SandboxImageMissing",
            False,
        ),
    ]
    _forget(docker.from_env(), found.remote())
    before = found.registry.manifest_requests(found.repository, ("GET", "HEAD"))
    try:
        for index, (settings, image, error, kind, retryable) in enumerate(cases):
            sandboxes = sandboxes_with(settings)
            request = SandboxRequest(task=found.task(image), workflow_id=f"{prefix}-{index}", attempt=0)
            with pytest.raises(error) as raised:
                await sandboxes.boot(request)
            assert image.split("/")[0] in str(raised.value), "the message names the registry or the image"
            with pytest.raises(ApplicationError) as failed:
                await ActivityEnvironment().run(sandbox_faces.boot_sandbox, sandboxes, request)
            assert (failed.value.type, failed.value.non_retryable) == (kind, not retryable)
        assert found.registry.manifest_requests(found.repository, ("GET", "HEAD")) == before, "no case pulled the image"
    finally:
        await reap_prefix(prefix)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_registry_gone_mid_pull_is_unavailable_and_a_later_pull_completes(images):
    """A registry behind a 1 MB/s front is stopped once the pull has moved bytes: the pull fails as
    ``RegistryUnavailable`` (retryable), from the engine or at its 15 s timeout while the engine still retries;
    with the registry back the same puller pulls the image whole."""
    found, pulled = images
    client = docker.from_env()
    front = ThrottledFront(found.registry.port, bytes_per_s=1 << 20)
    await front.start()
    address = f"127.0.0.1:{front.port}"
    image = found.remote(address)
    pulled.append(image)
    puller = ImagePuller(
        lambda: client,
        ImageSettings(credentials=found.credentials.model_copy(update={"registry": address})),
        ImageMetrics(),
    )
    moved = asyncio.Event()

    def on_progress(progress: ImagePull) -> None:
        if progress.bytes_done > 0:
            moved.set()

    try:
        pull = asyncio.create_task(puller.pull(image, 15, on_progress))
        await asyncio.wait([pull, asyncio.create_task(moved.wait())], return_when=asyncio.FIRST_COMPLETED)
        assert moved.is_set() and not pull.done(), "the pull was under way"
        found.registry.stop()
        front.cut()
        with pytest.raises(RegistryUnavailable, match=address):
            await pull
        found.registry.start()
        await puller.pull(image, 300)
        assert client.images.get(image).attrs["Size"] > BLOB_BYTES
    finally:
        if not found.registry.running:
            found.registry.start()
        await front.stop()


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_pull_policy_always_asks_the_registry_on_every_boot(images, reap_prefix):
    found, pulled = images
    image = found.remote()
    pulled.append(image)
    sandboxes = sandboxes_with(ImageSettings(pull_policy="always", credentials=found.credentials))
    prefix = f"pytest-pullalways-{uuid.uuid4().hex[:6]}"
    task = found.task(image)
    try:
        asked = ("GET", "HEAD")
        before = found.registry.manifest_requests(found.repository, asked)
        for index in range(2):
            await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-{index}", attempt=0))
        assert found.registry.manifest_requests(found.repository, asked) >= before + 2, "each boot asked the registry"
    finally:
        await reap_prefix(prefix)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_cache_removes_the_least_recently_booted_image_past_its_budget_never_one_in_use(images, reap_prefix):
    """Three task images of about the same size under a budget of two and a half: booting the third removes
    the first (its sandbox is gone), while the second's sandbox keeps running from its image."""
    found, pulled = images
    client = docker.from_env()
    names = [f"probe/cache{index}:{found.tag}" for index in range(3)]
    for name in names:
        await push_new_image(client, found.registry, found.calc.image, name, blob_bytes=4 << 20)
    remote = [f"{found.registry.address}/{name}" for name in names]
    pulled.extend(remote)
    size = client.images.get(found.calc.image).attrs["Size"] + (4 << 20)
    sandboxes = sandboxes_with(ImageSettings(credentials=found.credentials, cache_bytes=int(size * 2.5)))
    prefix = f"pytest-cache-{uuid.uuid4().hex[:6]}"

    def boot(index: int):
        return sandboxes.boot(
            SandboxRequest(task=found.task(remote[index]), workflow_id=f"{prefix}-{index}", attempt=0)
        )

    try:
        first = await boot(0)
        await sandboxes.destroy(first)
        running = await boot(1)
        await boot(2)
        on_engine = {name for name in remote if image_present(client, name)}
        assert on_engine == {remote[1], remote[2]}, "the least recently booted image went; the running sandbox's stayed"
        assert sandboxes.image_cache.known == [remote[1], remote[2]]
        assert (await sandboxes.exec(running, "true")).exit_code == 0
    finally:
        await reap_prefix(prefix)
