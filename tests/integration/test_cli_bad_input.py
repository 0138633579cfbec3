"""`tarn submit` with bad input: exit non-zero with one line naming the flag, and contact nothing.

The RM and WebHDFS URLs point at a loopback server that records every request: a bad input
must leave it untouched, so nothing was uploaded or submitted.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

GOOD = ["--model-repository", "hdfs:///user/tarn/models", "--runtime", "process", "--user", "tarn"]


class Recorder(ThreadingHTTPServer):
    requests: list[str]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            self.server.requests.append(f"{self.command} {self.path}")  # type: ignore[attr-defined]
            self.send_response(500)
            self.end_headers()

        do_GET = do_POST = do_PUT = do_DELETE = _record

        def log_message(self, *args: object) -> None:
            pass

    server = Recorder(("127.0.0.1", 0), Handler)
    server.requests = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def replace(flag: str, value: str) -> list[str]:
    args = list(GOOD)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    return args


CASES = [
    ("min above max", [*GOOD, "--min-instances", "5", "--max-instances", "2"], "--min-instances"),
    ("negative min", [*GOOD, "--min-instances", "-1"], "--min-instances"),
    ("scale-up above 1", [*GOOD, "--scale-up", "1.5"], "--scale-up"),
    ("scale-down negative", [*GOOD, "--scale-down", "-0.1"], "--scale-down"),
    ("scale-up not above scale-down", [*GOOD, "--scale-up", "0.3", "--scale-down", "0.5"], "--scale-up"),
    ("port clash", [*GOOD, "--grpc-port", "8000"], "--grpc-port"),
    ("port out of range", [*GOOD, "--metrics-port", "70000"], "--metrics-port"),
    ("tp below 1", [*GOOD, "--tp", "0"], "--tp"),
    ("pp below 1", [*GOOD, "--pp", "0"], "--pp"),
    (
        "GPUs below tp x pp",
        [*GOOD, "--tp", "2", "--pp", "2", "--gpus-per-instance", "2"],
        "--gpus-per-instance",
    ),
    ("unknown repository scheme", replace("--model-repository", "s3://bucket/models"), "--model-repository"),
    ("relative repository", replace("--model-repository", "models"), "--model-repository"),
    ("shell metacharacter in path", replace("--model-repository", "/models;rm -rf /"), "--model-repository"),
    ("malformed env", [*GOOD, "--env", "NOEQUALS"], "--env"),
    ("env with a bad key", [*GOOD, "--env", "1BAD=x"], "--env"),
    ("negative cooldown", [*GOOD, "--cooldown", "-5"], "--cooldown"),
    ("secrets not on HDFS", [*GOOD, "--secrets", "ftp://host/x.jceks"], "--secrets"),
    ("relative zk path", [*GOOD, "--zk-path", "services/triton"], "--zk-path"),
    ("docker without image", replace("--runtime", "docker"), "--image"),
    ("missing repository", ["--runtime", "process", "--user", "tarn"], "--model-repository"),
    ("not a number", [*GOOD, "--port", "eighty"], "--port"),
]


@pytest.mark.parametrize(("argv", "flag"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_submit_exits_with_one_line_and_contacts_nothing(
    recorder: Recorder, argv: list[str], flag: str
) -> None:
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tarn",
            "submit",
            *argv,
            "--rm-url",
            url,
            "--webhdfs-url",
            url,
            "--token",
            "t0ken-x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tarn: error:")
    assert flag in lines[0]
    assert "t0ken-x" not in done.stderr + done.stdout
    assert recorder.requests == []
