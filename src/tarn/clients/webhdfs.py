"""WebHDFS: the NameNode answers metadata calls and redirects data calls to a DataNode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests
import requests.auth

from tarn.errors import ClusterError
from tarn.launcher.webhdfs import FileChecksum, FileStatus


class WebHdfs:
    def __init__(
        self, url: str, user: str, timeout: float = 60.0, auth: requests.auth.AuthBase | None = None
    ) -> None:
        self._base = url.rstrip("/") + "/webhdfs/v1"
        self._user = user
        self._timeout = timeout
        self._session = requests.Session()
        self._session.auth = auth  # SPNEGO on a Kerberized cluster (tarn.clients.resourcemanager.spnego)

    def _url(self, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"HDFS path must be absolute: {path!r}")
        return self._base + path

    def _call(self, method: str, path: str, op: str, ok: tuple[int, ...], **params: Any) -> requests.Response:
        query = {"op": op, "user.name": self._user, **params}
        try:
            reply = self._session.request(
                method, self._url(path), params=query, timeout=self._timeout, allow_redirects=False
            )
        except requests.RequestException as exc:
            raise ClusterError(f"WebHDFS {op} {path}: {exc}") from exc
        if reply.status_code not in ok:
            raise ClusterError(f"WebHDFS {op} {path} answered {reply.status_code}: {reply.text[:300]}")
        return reply

    def status(self, path: str) -> dict[str, Any] | None:
        reply = self._call("GET", path, "GETFILESTATUS", ok=(200, 404))
        if reply.status_code == 404:
            return None
        found: dict[str, Any] = reply.json()["FileStatus"]
        return found

    def list_files(self, path: str) -> list[FileStatus]:
        """Every file under ``path`` (absolute paths), [] when ``path`` does not exist."""
        files: list[FileStatus] = []
        pending = [path.rstrip("/") or "/"]
        while pending:
            directory = pending.pop()
            reply = self._call("GET", directory, "LISTSTATUS", ok=(200, 404))
            if reply.status_code == 404:
                continue
            for entry in reply.json()["FileStatuses"]["FileStatus"]:
                full = f"{directory}/{entry['pathSuffix']}" if entry.get("pathSuffix") else directory
                status = FileStatus.from_json(full, entry)
                if status.type == "DIRECTORY":
                    pending.append(full)
                elif status.type == "FILE":
                    files.append(status)
        return sorted(files, key=lambda f: f.path)

    def checksum(self, path: str) -> FileChecksum | None:
        """HDFS's checksum of a file (MD5-of-MD5-of-CRC32C by default); None when it has none."""
        found = self._call("GET", path, "GETFILECHECKSUM", ok=(200, 307))
        if found.status_code == 307:  # Hadoop 3.x: the NameNode redirects to a DataNode
            try:
                found = self._session.get(found.headers["Location"], timeout=self._timeout)
            except requests.RequestException as exc:
                raise ClusterError(f"WebHDFS GETFILECHECKSUM {path} (DataNode): {exc}") from exc
        obj = found.json().get("FileChecksum") if found.status_code == 200 else None
        return FileChecksum.from_json(obj) if obj else None

    def mkdirs(self, path: str, permission: str = "755") -> None:
        self._call("PUT", path, "MKDIRS", ok=(200,), permission=permission)

    def write(self, path: str, data: bytes, overwrite: bool = True, permission: str = "644") -> None:
        redirect = self._call(
            "PUT", path, "CREATE", ok=(307,), overwrite=str(overwrite).lower(), permission=permission
        )
        try:
            reply = self._session.put(redirect.headers["Location"], data=data, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ClusterError(f"WebHDFS CREATE {path} (DataNode): {exc}") from exc
        if reply.status_code != 201:
            raise ClusterError(f"WebHDFS CREATE {path} (DataNode) answered {reply.status_code}")

    def read(self, path: str) -> bytes:
        redirect = self._call("GET", path, "OPEN", ok=(307,))
        try:
            reply = self._session.get(redirect.headers["Location"], timeout=self._timeout)
        except requests.RequestException as exc:
            raise ClusterError(f"WebHDFS OPEN {path} (DataNode): {exc}") from exc
        if reply.status_code != 200:
            raise ClusterError(f"WebHDFS OPEN {path} (DataNode) answered {reply.status_code}")
        return reply.content

    def delete(self, path: str, recursive: bool = False) -> bool:
        reply = self._call("DELETE", path, "DELETE", ok=(200,), recursive=str(recursive).lower())
        return bool(reply.json()["boolean"])

    def upload_tree(self, local: Path, remote: str) -> int:
        """Copy every file under `local` to the same relative path under `remote`; the count copied."""
        files = [p for p in sorted(local.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            self.write(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())
        return len(files)
