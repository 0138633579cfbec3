"""What a config asks for: the service spec and the files uploaded before it (the two zipapps, the
token, the keystore password, Ranger's plugin configuration), at paths private to the service user.

Each component's environment carries ``TARN_CODE_DIGEST``, the digest of the zipapp it runs, and
the spec's ``version`` is TARN's version plus a digest of the whole spec, so new TARN code is a spec
change of the component that runs it (the controller's changes often, the launcher's seldom). The
controller's also carries ``TARN_RANGER_CONF_DIGEST`` with ``--ranger-service``: an edited
``ranger-triton-security.xml`` relaunches the controller alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tarn import payload
from tarn.errors import ConfigError
from tarn.ranger.settings import settings_of, shipped_files
from tarn.service.docker_policy import PolicyMissing, check_docker_policy
from tarn.service.plan import spec_version
from tarn.spec import CONTROLLER, TRITON, Artifacts, build_service_spec, component_of
from tarn.stdlib.api_token import read_token
from tarn.stdlib.config import TarnConfig, cli_flag

JSON = dict[str, Any]

# Hadoop's own variable for a credential store's password (its default password is "none").
STORE_PASSWORD_ENV = "HADOOP_CREDSTORE_PASSWORD"  # noqa: S105 - the name of a variable
CODE_DIGEST_ENV = "TARN_CODE_DIGEST"
RANGER_CONF_DIGEST_ENV = "TARN_RANGER_CONF_DIGEST"


def artifact_dir(user: str, service_name: str) -> str:
    """Where a service's files live on HDFS: private to the service user."""
    return f"/user/{user}/.tarn/{service_name}"


def planned_artifacts(
    config: TarnConfig,
    user: str,
    environ: Mapping[str, str],
    rm_urls: tuple[str, ...] = (),
    ranger_conf: tuple[str, ...] = (),
) -> Artifacts:
    """hdfs:/// URIs (the cluster's default file system) of the files a deployment uploads, and
    the RM URLs the controller is given; ``ranger_conf``: the names of the Ranger files to ship."""
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
        ranger_conf=tuple(f"{base}/{name}" for name in ranger_conf),
    )


@dataclass(frozen=True)
class Desired:
    """A service as a config asks for it: the spec, and the files to upload first (path → bytes)."""

    config: TarnConfig
    user: str
    spec: JSON
    uploads: dict[str, bytes] = field(repr=False)  # holds the token: never printed
    notes: tuple[str, ...] = ()  # what the user asked for that TARN accepts but does not use

    @property
    def directory(self) -> str:
        return artifact_dir(self.user, self.config.service_name)


def desired_service(
    config: TarnConfig,
    user: str,
    environ: Mapping[str, str],
    rm_urls: tuple[str, ...] = (),
    realm: str | None = None,
    conf_dir: Path | None = None,
    policy_optional: bool = False,
) -> Desired:
    """Validate ``config`` and build its spec and files; ConfigError names the flag at fault.
    ``realm``: the cluster is Kerberized (the submitter's realm, "" when unknown), so the service
    needs a principal of its own, in that realm. ``conf_dir``: the Hadoop client configuration, where
    a Docker service's spec is checked against container-executor.cfg (tarn.service.docker_policy);
    ``policy_optional`` (a dry run): without that file, a note instead of an error."""
    ranger = settings_of(config)  # reads and checks ranger-triton-security.xml before any contact
    ranger_files = shipped_files(Path(config.ranger_conf_dir)) if ranger and config.ranger_conf_dir else {}
    artifacts = planned_artifacts(config, user, environ, rm_urls, tuple(ranger_files))
    spec = build_service_spec(config, artifacts)  # validates everything before any contact
    unchecked: tuple[str, ...] = ()
    try:
        check_docker_policy(config, spec, conf_dir)
    except PolicyMissing as exc:
        if not policy_optional:
            raise
        unchecked = (f"the Docker settings were not checked: {exc}",)
    if realm is not None:
        check_service_identity(config, realm)
    code = {
        _hdfs_path(artifacts.payload): payload.controller_zipapp(),
        _hdfs_path(artifacts.launcher): payload.launcher_zipapp(),
    }
    uploads = dict(code)
    if artifacts.token_file is not None:
        uploads[_hdfs_path(artifacts.token_file)] = _token_bytes(config)
    if artifacts.secrets_password_file is not None:
        uploads[_hdfs_path(artifacts.secrets_password_file)] = environ[STORE_PASSWORD_ENV].encode()
    for path in artifacts.ranger_conf:
        uploads[_hdfs_path(path)] = ranger_files[path.rsplit("/", 1)[-1]]
    for component, path in ((CONTROLLER, artifacts.payload), (TRITON, artifacts.launcher)):
        env = _env(spec, component)
        env[CODE_DIGEST_ENV] = hashlib.sha256(code[_hdfs_path(path)]).hexdigest()[:16]
    if ranger_files:
        digest = hashlib.sha256()
        for name, data in sorted(ranger_files.items()):
            digest.update(name.encode() + b"\0" + data + b"\0")
        _env(spec, CONTROLLER)[RANGER_CONF_DIGEST_ENV] = digest.hexdigest()[:16]
    spec["version"] = spec_version(spec)
    notes = config.notes + (ranger.notes if ranger else ()) + unchecked
    return Desired(config=config, user=user, spec=spec, uploads=uploads, notes=notes)


def check_service_identity(config: TarnConfig, realm: str) -> None:
    """A secure cluster's YARN refuses a service without kerberos_principal, and its containers could
    not reach HDFS or the RM once the submission's tokens lapse: refuse before any contact."""
    if not config.service_principal:
        raise ConfigError(
            f"{cli_flag('service_principal')}: the cluster uses Kerberos and the service needs a principal "
            f"of its own; add {cli_flag('service_principal')} tarn/_HOST@{realm or 'REALM'} and "
            f"{cli_flag('service_keytab')} (its keytab, on every NodeManager)"
        )
    service_realm = config.service_principal.rpartition("@")[2]
    if realm and service_realm != realm:
        raise ConfigError(
            f"{cli_flag('service_principal')}: realm {service_realm} is not the cluster's ({realm}); "
            f"write {config.service_principal.rpartition('@')[0]}@{realm}"
        )


def _env(spec: JSON, component: str) -> dict[str, str]:
    env: dict[str, str] = (
        (component_of(spec, component) or {}).setdefault("configuration", {}).setdefault("env", {})
    )
    return env


def _hdfs_path(uri: str) -> str:
    return uri.removeprefix("hdfs://")


def _token_bytes(config: TarnConfig) -> bytes:
    token = read_token(config.token, config.token_file)
    if token is None:
        raise ValueError("no token to upload")  # planned_artifacts plans a token file only with one
    return token.reveal().encode()
