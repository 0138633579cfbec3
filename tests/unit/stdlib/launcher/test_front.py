"""The OpenAI front beside Triton (--openai-port): the launcher's decisions as tables (its port,
its command, its environment, the restart pauses), the option's way from the service spec to the
launcher, then the launcher itself with real processes: a stand-in tritonserver and the real front
from this source tree, which answers /health on its port."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tarn.spec import TRITON, Artifacts, build_service_spec
from tarn.stdlib.config import parse_config
from tarn.stdlib.launcher.main import (
    front_command,
    front_environment,
    front_port,
    listening_ports,
    local_url,
    package_root,
    parse_args,
)
from tarn.stdlib.launcher.supervise import restart_delay
from tests.support.loopback import free_ports
from tests.support.processes import alive


def launcher_args(*extra: str) -> argparse.Namespace:
    return parse_args(["--model-repository", "/models", *extra])


# ---- decisions


@pytest.mark.parametrize(
    ("extra", "port", "listening"),
    [
        ([], None, [8000, 8001, 8002]),
        (["--openai-port", "9000"], 9000, [8000, 8001, 8002, 9000]),
        (
            ["--openai-port", "9000", "--port-stride", "10", "--instance-id", "2"],
            9020,
            [8020, 8021, 8022, 9020],
        ),
        (["--port-stride", "10", "--instance-id", "2"], None, [8020, 8021, 8022]),
    ],
    ids=["no front", "front", "front shifted like Triton", "stride without a front"],
)
def test_the_fronts_port_follows_the_stride(extra: list[str], port: int | None, listening: list[int]) -> None:
    args = launcher_args(*extra)
    assert front_port(args) == port
    assert listening_ports(args) == listening


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("0.0.0.0", "http://127.0.0.1:8000"),  # noqa: S104 - Triton's default bind address
        ("10.0.0.7", "http://10.0.0.7:8000"),
        ("::", "http://[::1]:8000"),
        ("fd00::7", "http://[fd00::7]:8000"),
    ],
)
def test_the_front_reaches_its_triton_where_triton_listens(address: str, url: str) -> None:
    assert local_url(address, 8000) == url


def test_the_front_is_bound_like_triton_and_speaks_to_its_own() -> None:
    args = launcher_args(
        *("--openai-port", "9000", "--port-stride", "10", "--instance-id", "1", "--address", "10.0.0.7")
    )
    assert front_command(args, "/usr/bin/python3") == [
        "/usr/bin/python3",
        "-m",
        "tarn.stdlib.openai",
        "--port=9010",
        "--host=10.0.0.7",
        "--triton-url=http://10.0.0.7:8010",
        "--max-generations=0",  # the model's own max_concurrent_generations
        "--admission=fair",
    ]
    assert front_command(launcher_args(), "python3") is None
    with_token = launcher_args("--openai-port", "9000", "--front-token-file", "tarn-token")
    assert "--token-file=tarn-token" in (front_command(with_token, "python3") or [])
    admitting = launcher_args(
        "--openai-port", "9000", "--openai-max-generations", "4", "--openai-admission", "fifo"
    )
    assert (front_command(admitting, "python3") or [])[-2:] == ["--max-generations=4", "--admission=fifo"]


def test_the_fronts_environment_finds_this_package_and_keeps_the_containers_path() -> None:
    environ = {"PATH": "/usr/bin", "PYTHONPATH": "/opt/backend:/opt/more"}
    assert front_environment(environ, "/app/tarn-launcher.pyz") == {
        "PATH": "/usr/bin",
        "PYTHONPATH": os.pathsep.join(["/app/tarn-launcher.pyz", "/opt/backend", "/opt/more"]),
    }
    assert front_environment({}, "/src")["PYTHONPATH"] == "/src"
    assert (Path(package_root()) / "tarn" / "stdlib" / "openai" / "__main__.py").is_file()


@pytest.mark.parametrize(
    ("ends", "now", "delay"),
    [
        ([100.0], 100.0, 0.5),  # the first end: a short pause
        ([100.0, 101.0], 101.0, 1.0),  # doubled at each end since
        ([100.0, 101.0, 103.0, 107.0], 107.0, 4.0),
        ([10.0, 20.0, 30.0, 39.0, 100.0], 100.0, 0.5),  # ends older than the window are forgiven
        ([100.0, 101.0, 103.0, 107.0, 115.0], 115.0, None),  # the fifth within a minute: broken
    ],
    ids=["first", "second", "fourth", "old ends forgiven", "fifth gives up"],
)
def test_a_sidecar_is_restarted_after_a_pause_until_it_keeps_ending(
    ends: list[float], now: float, delay: float | None
) -> None:
    assert restart_delay(ends, now, max_ends=5, window_s=60.0) == delay


def test_the_pause_has_a_ceiling() -> None:
    ends = [float(t) for t in range(10)]
    assert restart_delay(ends, 9.0, max_ends=100, window_s=60.0) == 8.0


# ---- from the service spec to the launcher


def test_the_spec_gives_the_launcher_its_fronts_port() -> None:
    base = ["--model-repository", "hdfs:///m", "--image", "triton:1", "--no-anti-affinity"]
    config = parse_config([*base, "--max-instances", "3", "--port-stride", "10", "--openai-port", "9000"], {})
    artifacts = Artifacts(payload="hdfs:///a/tarn.pyz", launcher="hdfs:///a/tarn-launcher.pyz")
    [triton] = [c for c in build_service_spec(config, artifacts)["components"] if c["name"] == TRITON]
    words = shlex.split(triton["launch_command"].replace("${COMPONENT_ID}", "2"))
    assert "--openai-port" in words
    assert words[:3] == ["exec", "python3", "tarn-launcher.pyz"]
    assert front_port(parse_args(words[3:])) == config.instance_ports(2).openai == 9020


# ---- the launcher with real processes

# A stand-in tritonserver: answers ready on its --http-port (the front's /health asks), writes its
# pid, exits 0 on SIGTERM as Triton's graceful shutdown does.
STANDIN = textwrap.dedent(
    """\
    import http.server, os, signal, sys, threading, time
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    port = int(next(a for a in sys.argv if a.startswith("--http-port=")).split("=")[1])
    class Ready(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(os.environ["STANDIN_PIDS"] + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.rename(os.environ["STANDIN_PIDS"] + ".tmp", os.environ["STANDIN_PIDS"])
    time.sleep(600)
    """
)


def front_health(port: int) -> tuple[int, str] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return reply.status, json.loads(reply.read())["status"]
    except OSError:
        return None


def front_pid(port: int) -> int | None:
    """The pid listening on ``port``, from /proc (the front's; no ss or lsof needed)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (proc / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            return int(proc.name)
    return None


def wait_for(check: object, what: str, timeout: float = 20.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check() if callable(check) else None
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def start_launcher(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """The launcher, its stand-in Triton's pid and its front's port."""
    standin = tmp_path / "tritonserver"
    standin.write_text(f"#!{sys.executable}\n{STANDIN}")
    standin.chmod(0o755)
    (tmp_path / "models").mkdir()
    pids = tmp_path / "pids"
    argv = ["--model-repository", str(tmp_path / "models"), "--tritonserver", str(standin)]
    http, grpc, metrics, port = free_ports(4)
    argv += ["--port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    argv += ["--address", "127.0.0.1", "--openai-port", str(port)]
    code = f"import sys; from tarn.stdlib.launcher.main import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "STANDIN_PIDS": str(pids)}
    launcher = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, env=env)
    wait_for(pids.exists, "the stand-in tritonserver starts")
    wait_for(lambda: front_health(port), "the front answers /health")
    return launcher, int(pids.read_text()), port


def test_the_front_serves_beside_triton_is_restarted_and_stops_with_it(tmp_path: Path) -> None:
    launcher, triton, port = start_launcher(tmp_path)
    front = None
    try:
        assert front_health(port) == (200, "ok")
        front = front_pid(port)
        assert front is not None
        assert os.getpgid(front) == os.getpgid(launcher.pid)  # the container's group: swept with it
        os.kill(front, signal.SIGKILL)
        wait_for(lambda: front_pid(port) not in (None, front), "the front starts again")
        assert front_health(port) == (200, "ok")
        assert alive(triton)  # /v2 never stopped for it
        front = front_pid(port)
        launcher.send_signal(signal.SIGTERM)  # YARN's stop: to the launcher alone
        assert launcher.wait(timeout=20) == 128 + signal.SIGTERM  # stopped by YARN, whatever Triton said
        assert front is not None
        assert not alive(front)
        assert not alive(triton)
    finally:
        launcher.kill()
        for pid in (triton, front):
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_dead_triton_takes_its_front_with_it(tmp_path: Path) -> None:
    launcher, triton, port = start_launcher(tmp_path)
    front = front_pid(port)
    try:
        os.kill(triton, signal.SIGKILL)
        assert launcher.wait(timeout=20) == 137
        assert front is not None
        assert not alive(front)
        assert front_health(port) is None
    finally:
        launcher.kill()
        if front is not None and alive(front):
            os.kill(front, signal.SIGKILL)


# supervise() with a sidecar that always fails at once, in a process of its own (it makes the
# process a subreaper and installs signal handlers).
BROKEN = textwrap.dedent(
    """\
    import sys
    from tarn.stdlib.launcher import supervise
    triton = [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, "
              "lambda *_: sys.exit(0)); print('triton up', flush=True); time.sleep(600)"]
    front = supervise.Sidecar("the front", (sys.executable, "-c", "raise SystemExit(3)"), {}, max_ends=3)
    sys.exit(supervise.exit_status(supervise.supervise(triton, {}, group=False, sidecar=front)))
    """
)


def test_a_front_that_keeps_ending_stops_the_instance() -> None:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", BROKEN], capture_output=True, text=True, timeout=30, check=False,
        start_new_session=True,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "triton up" in done.stdout
    assert done.stderr.count("the front ended with status 3: starting it again") == 2
    assert "the front ended with status 3, 3 times within 60 s: stopping the instance" in done.stderr
    assert time.monotonic() - began < 15  # pauses of 0.5 and 1 s, then Triton's graceful exit
