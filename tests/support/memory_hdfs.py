"""HDFS as the service life cycle writes it (mkdirs, write, delete), in memory: path -> bytes."""

from __future__ import annotations


class MemoryHdfs:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def mkdirs(self, path: str, permission: str = "755") -> None:
        pass

    def write(self, path: str, data: bytes, overwrite: bool = True, permission: str = "644") -> None:
        self.files[path] = data

    def delete(self, path: str, recursive: bool = False) -> bool:
        gone = [p for p in self.files if p == path or p.startswith(path + "/")]
        for item in gone:
            del self.files[item]
        return bool(gone)
