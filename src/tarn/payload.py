"""The two files `tarn submit` ships to HDFS, built from the installed packages as zipapps.

* ``tarn-launcher.pyz``: the ``tarn.stdlib`` package (the launcher in it), ``tarn.errors`` and the
  two pure-Python libraries of its listeners (h11 for HTTP/1.1, prometheus_client for /metrics). It
  runs in a stock Triton image, so it may import only the Python standard library and what it
  carries (checked by a unit test).
* ``tarn.pyz``: the whole ``tarn`` package plus the pure-Python libraries the controller uses,
  copied from this environment, so the controller needs nothing installed on the node.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

# Pure-Python distributions the controller imports (compiled modules cannot load from a zip;
# charset_normalizer ships .py twins of its compiled parts).
CONTROLLER_LIBRARIES = (
    "requests",
    "urllib3",
    "idna",
    "charset_normalizer",
    "certifi",
    "kazoo",
    "puresasl",  # kazoo's SASL; its GSSAPI is tarn.clients.zk_sasl's (ctypes), not the compiled kerberos
    "prometheus_client",
    "h11",  # the activator's HTTP/1.1 (tarn.stdlib.http1)
)

# Pure-Python distributions the launcher's listeners (the OpenAI front) import; every one must be
# installed (they are tarn's own dependencies), or the front would fail only on the node.
LAUNCHER_LIBRARIES = ("h11", "prometheus_client")


def launcher_zipapp() -> bytes:
    tarn_dir = _package_dir("tarn")
    files = [(tarn_dir / name, f"tarn/{name}") for name in ("__init__.py", "errors.py")]
    files += _tree(tarn_dir / "stdlib", "tarn/stdlib")
    for library in LAUNCHER_LIBRARIES:
        files += _tree(_package_dir(library), library)
    return _zipapp(files, main=_main("tarn.stdlib.launcher.main"))


def controller_zipapp() -> bytes:
    files = _tree(_package_dir("tarn"), "tarn")
    for library in CONTROLLER_LIBRARIES:
        if importlib.util.find_spec(library) is not None:
            files += _tree(_package_dir(library), library)
    return _zipapp(files, main=_main("tarn.cli"))


def _main(module: str) -> str:
    # Guarded: worker processes (spawn) import __main__ again and must not rerun the command.
    return f'if __name__ == "__main__":\n    from {module} import main\n\n    raise SystemExit(main())\n'


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _tree(root: Path, prefix: str) -> list[tuple[Path, str]]:
    return [
        (path, f"{prefix}/{path.relative_to(root).as_posix()}")
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".pem", ".typed")
    ]


def _zipapp(files: Iterable[tuple[Path, str]], main: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        # A fixed timestamp on every entry keeps the archive identical for identical sources
        # (tarn_deploy compares the zipapps' digests to decide whether to upgrade).
        entries = [("__main__.py", main.encode())] + [(name, path.read_bytes()) for path, name in files]
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    """``python -m tarn.payload OUT``: write the controller zipapp (tarn.pyz) to OUT.

    The haproxy role builds the sync's tarn.pyz this way; every library must be present, or the
    zipapp would fail only on the node that runs it.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tarn.payload OUT", file=sys.stderr)
        return 2
    missing = [name for name in CONTROLLER_LIBRARIES if importlib.util.find_spec(name) is None]
    if missing:
        print(f"tarn.payload: missing {', '.join(missing)}: pip install 'tarn[controller]'", file=sys.stderr)
        return 1
    Path(args[0]).write_bytes(controller_zipapp())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
