"""What a config asks for: the service spec and the files uploaded before it (the two zipapps, the
token, the keystore password), at paths private to the service user.

Each component's environment carries ``TARN_CODE_DIGEST``, the digest of the zipapp it runs, and
the spec's ``version`` is TARN's version plus a digest of the whole spec, so new TARN code is a spec
change of the component that runs it (the controller's changes often, the launcher's seldom).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tarn import payload
from tarn.service.plan import spec_version
from tarn.spec import CONTROLLER, TRITON, Artifacts, build_service_spec, component_of
from tarn.stdlib.api_token import read_token
from tarn.stdlib.config import TarnConfig

JSON = dict[str, Any]

# Hadoop's own variable for a credential store's password (its default password is "none").
STORE_PASSWORD_ENV = "HADOOP_CREDSTORE_PASSWORD"  # noqa: S105 - the name of a variable
CODE_DIGEST_ENV = "TARN_CODE_DIGEST"


def artifact_dir(user: str, service_name: str) -> str:
    """Where a service's files live on HDFS: private to the service user."""
    return f"/user/{user}/.tarn/{service_name}"


def planned_artifacts(
    config: TarnConfig, user: str, environ: Mapping[str, str], rm_urls: tuple[str, ...] = ()
) -> Artifacts:
    """hdfs:/// URIs (the cluster's default file system) of the files a deployment uploads, and
    the RM URLs the controller is given."""
    base = f"hdfs://{artifact_dir(user, config.service_name)}"
    token = f"{base}/token" if config.token is not None or config.token_file is not None else None
    store_password = (
        f"{base}/secrets.password" if config.secrets and environ.get(STORE_PASSWORD_ENV) else None
    )
    return Artifacts(
        payload=f"{base}/tarn.pyz",
        launcher=f"{base}/tarn-launcher.pyz",
        token_file=token,
        secrets_password_file=store_password,
        rm_urls=rm_urls,
    )


@dataclass(frozen=True)
class Desired:
    """A service as a config asks for it: the spec, and the files to upload first (path → bytes)."""

    config: TarnConfig
    user: str
    spec: JSON
    uploads: dict[str, bytes] = field(repr=False)  # holds the token: never printed

    @property
    def directory(self) -> str:
        return artifact_dir(self.user, self.config.service_name)


def desired_service(
    config: TarnConfig, user: str, environ: Mapping[str, str], rm_urls: tuple[str, ...] = ()
) -> Desired:
    """Validate ``config`` and build its spec and files; ConfigError names the flag at fault."""
    artifacts = planned_artifacts(config, user, environ, rm_urls)
    spec = build_service_spec(config, artifacts)  # validates everything before any contact
    code = {
        _hdfs_path(artifacts.payload): payload.controller_zipapp(),
        _hdfs_path(artifacts.launcher): payload.launcher_zipapp(),
    }
    uploads = dict(code)
    if artifacts.token_file is not None:
        uploads[_hdfs_path(artifacts.token_file)] = _token_bytes(config)
    if artifacts.secrets_password_file is not None:
        uploads[_hdfs_path(artifacts.secrets_password_file)] = environ[STORE_PASSWORD_ENV].encode()
    for component, path in ((CONTROLLER, artifacts.payload), (TRITON, artifacts.launcher)):
        env = (component_of(spec, component) or {}).setdefault("configuration", {}).setdefault("env", {})
        env[CODE_DIGEST_ENV] = hashlib.sha256(code[_hdfs_path(path)]).hexdigest()[:16]
    spec["version"] = spec_version(spec)
    return Desired(config=config, user=user, spec=spec, uploads=uploads)


def _hdfs_path(uri: str) -> str:
    return uri.removeprefix("hdfs://")


def _token_bytes(config: TarnConfig) -> bytes:
    token = read_token(config.token, config.token_file)
    if token is None:
        raise ValueError("no token to upload")  # planned_artifacts plans a token file only with one
    return token.reveal().encode()
