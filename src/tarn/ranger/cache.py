"""The plugin's cache in ``ranger.plugin.triton.policy.cache.dir``, in Ranger's own files.

Ranger's plugins write the last documents downloaded to ``<appId>_<service>.json`` (ServicePolicies),
``<appId>_<service>_roles.json`` and ``<appId>_<service>_userstore.json``, and read them at start
when Admin cannot be reached. TARN uses the same names and formats, so the files are Ranger's
and a Java plugin's cache reads the same. Each file is replaced atomically (mode 0600).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tarn.errors import TarnError
from tarn.ranger.state import Documents
from tarn.stdlib.files import write_atomically

JSON = dict[str, Any]


class CacheError(TarnError):
    """The cache could not be read or written."""


class PolicyCache:
    def __init__(self, directory: Path, app_id: str, service: str) -> None:
        self.directory = directory
        self._service = service
        # PolicyRefresher, RangerRolesProvider, RangerUserStoreEnricher: path separators become '_'
        stem = f"{app_id}_{service}".replace(os.sep, "_").replace(os.pathsep, "_")
        self.policies_file = directory / f"{stem}.json"
        self.roles_file = directory / f"{stem}_roles.json"
        self.user_store_file = directory / f"{stem}_userstore.json"

    def load(self) -> tuple[Documents, float] | None:
        """The cached documents and when the policies were written; None when there are no policies."""
        if not self.policies_file.is_file():
            return None
        policies = self._read(self.policies_file)
        if policies is None:
            return None
        named = policies.get("serviceName")
        if named != self._service:  # another service's policies never authorize this one
            raise CacheError(f"{self.policies_file} holds service {named!r}, not {self._service!r}")
        documents = Documents(policies, self._read(self.roles_file), self._read(self.user_store_file))
        return documents, self.policies_file.stat().st_mtime

    def save(self, documents: Documents, held: Documents) -> None:
        """Write the documents that differ from ``held`` (what the cache has)."""
        pairs = (
            (self.policies_file, documents.policies, held.policies),
            (self.roles_file, documents.roles, held.roles),
            (self.user_store_file, documents.user_store, held.user_store),
        )
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            for path, document, before in pairs:
                if document is not None and document != before:
                    write_atomically(path, json.dumps(document, indent=1).encode())
        except OSError as exc:
            raise CacheError(f"{self.directory}: {exc.strerror or exc}") from exc

    def _read(self, path: Path) -> JSON | None:
        if not path.is_file():
            return None
        try:
            document = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise CacheError(f"{path} is unreadable ({exc.__class__.__name__})") from exc
        if not isinstance(document, dict):
            raise CacheError(f"{path} is not a JSON object")
        return document
