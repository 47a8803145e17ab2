"""Where a host's task images come from: the pull policy, mirror rules, one registry's credentials and the
image cache's budget. Pydantic and the standard library only, so the trainer side (which has no Docker SDK)
reads them too."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from durable_rollouts.docker_sandbox.image_refs import MirrorRule, registry_of, rewrite

PullPolicy = Literal["missing", "always", "never"]


# Docker Hub's other spellings; image names (``registry_of``) call it ``docker.io``.
DOCKER_HUB_ALIASES = frozenset({"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"})


class RegistryCredentials(BaseModel):
    """A user and password for one registry host, ``registry`` as an image name spells it (``mirror.local:5000``,
    ``docker.io``): a URL's scheme and path and Docker Hub's other host names are read as that."""

    registry: str
    username: str
    password: SecretStr

    @field_validator("registry")
    @classmethod
    def _host(cls, value: str) -> str:
        host = value.strip().lower().split("://", 1)[-1].split("/", 1)[0]
        if not host:
            raise ValueError(f"{value!r} names no registry host")
        return "docker.io" if host in DOCKER_HUB_ALIASES else host


class ImageSettings(BaseModel):
    """``pull_policy``: ``missing`` pulls an image the engine lacks, ``always`` pulls before every boot (a tag
    that moved is fetched again), ``never`` boots only from what the engine holds. ``mirrors`` rewrite the
    name an image is pulled and booted by (``image_refs.rewrite``); ``cache_bytes`` bounds the images kept."""

    pull_policy: PullPolicy = "missing"
    mirrors: list[MirrorRule] = []
    credentials: RegistryCredentials | None = None
    # The disk budget of the task images this host booted or pulled (``image_cache``); 0: no budget.
    cache_bytes: int = Field(0, ge=0)

    def local_name(self, image: str) -> str:
        """The name ``image`` is pulled and booted by on this host."""
        return rewrite(image, self.mirrors)

    def auth_for(self, image: str) -> dict[str, str] | None:
        """The settings' credentials when ``image`` is on their registry; None lets Docker's ``config.json`` answer."""
        if self.credentials is None or registry_of(image) != self.credentials.registry:
            return None
        return {"username": self.credentials.username, "password": self.credentials.password.get_secret_value()}
