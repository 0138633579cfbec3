"""``python -m tarn.stdlib.openai``: its flags, and the front it serves with the standard library only."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tarn import payload
from tarn.stdlib.openai.__main__ import parse_args, triton_endpoint
from tarn.stdlib.openai.server import Triton
from tests.support.loopback import free_port


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000", Triton("127.0.0.1", 8000)),
        ("http://localhost:8400/", Triton("localhost", 8400)),
        ("http://[::1]:8000", Triton("::1", 8000)),
        ("http://triton", Triton("triton", 80)),
    ],
)
def test_triton_urls(url: str, expected: Triton) -> None:
    assert triton_endpoint(url, 2.0) == expected


@pytest.mark.parametrize(
    "url", ["https://127.0.0.1:8000", "127.0.0.1:8000", "http://:8000", "http://h:99999", "http://h:8000/v2"]
)
def test_triton_urls_refused(url: str) -> None:
    with pytest.raises(ValueError, match="--triton-url"):
        triton_endpoint(url, 2.0)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--port", "70000"],
        ["--port", "1", "--connect-timeout", "0"],
        ["--port", "1", "--triton-url", "ftp://x"],
    ],
)
def test_bad_flags(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_the_front_runs_from_the_launcher_zipapp_with_nothing_installed(tmp_path: Path) -> None:
    """-I -S: no site-packages, only the launcher's zipapp (h11 and prometheus_client in it); a
    front on a free port answers, /health and generations 503 while no Triton listens; SIGTERM
    ends it with status 0."""
    launcher = tmp_path / "tarn-launcher.pyz"
    launcher.write_bytes(payload.launcher_zipapp())
    port, dead = free_port(), free_port()  # the front's, and one where no Triton listens
    front = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from tarn.stdlib.openai.__main__ import main; sys.exit(main(sys.argv[2:]))",
         str(launcher), "--port", str(port), "--triton-url", f"http://127.0.0.1:{dead}"],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                assert conn.getresponse().status == 503  # no Triton: an entry sends it nothing
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the front did not start"
                time.sleep(0.05)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("POST", "/v1/completions", body=json.dumps({"model": "m", "prompt": "x"}))
        reply = conn.getresponse()
        assert reply.status == 503
        assert json.loads(reply.read())["error"]["code"] == "triton_unreachable"
    finally:
        front.send_signal(signal.SIGTERM)
        _stdout, stderr = front.communicate(timeout=10)
    assert front.returncode == 0, stderr
    assert f"OpenAI front on 127.0.0.1:{port}" in stderr
