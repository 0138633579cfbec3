"""The HAProxy harness of tests/integration: network and mount namespaces of their own
(``unshare --net --mount``, a tmpfs on /run), where HAProxy binds the seeds' ``*:80`` and
``/var/run/haproxy.sock`` and touches nothing on this machine. In the namespace, on loopback only:
HAProxy with the seeds' exact haproxy.cfg (or the role's), Triton stand-ins on 127.0.0.11-15:8000
answering /v2/health/ready, a fake controller serving /instances on 127.0.0.2:8888, and on demand a
real ZooKeeper (Debian's package) on 127.0.0.3:2181 with a registrar that writes instance znodes.

The test process reaches the namespace through worker threads that joined its network namespace
(setns) and through /proc/<pid>/root for the socket. The fixtures that build it (``bench``,
``role_cfg``, ``zipapp``, ``haproxy_tools``) are tests/integration/conftest.py's.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from prometheus_client.parser import text_string_to_metric_families

from tarn.haproxy.plan import AdminState
from tarn.haproxy.runtime import RuntimeApi, RuntimeApiError
from tests.support import ROOT
from tests.support.loopback import QuietHandler, reply_text

SEEDS_CFG = ROOT / "tests" / "integration" / "fixtures" / "seeds-haproxy.cfg"
BACKEND = "triton_backend"
TOKEN = "it-token-7d1f"  # noqa: S105 - a test token; the test checks it is sent and never logged
CONTROLLER = ("127.0.0.2", 8888)
ZOOKEEPER = ("127.0.0.3", 2181)
INSTANCES = [f"127.0.0.{n}:8000" for n in range(11, 16)]
ADMIN = ("127.0.0.1", 8098)  # the activator's admin listener (its /metrics) in the bench's namespace
STATE_FILE = "/run/haproxy-server-state"  # in the namespace's private /run
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def enter_netns(pid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")
    finally:
        os.close(fd)


def _clean_env() -> dict[str, str]:
    """This environment without proxies (every address here is the namespace's loopback)."""
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # a burst of connections is not refused (http.server's default is 5)


class Namespace:
    """A network + mount namespace held by a sleeping process; lo up, a private tmpfs on /run."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.holder = subprocess.Popen(
            [
                "unshare",
                "--net",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "ip link set lo up && mount -t tmpfs tmpfs /run && echo ready && exec sleep infinity",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.holder.stdout is not None
        assert self.holder.stdout.readline().strip() == "ready"
        self.pool = ThreadPoolExecutor(8, initializer=enter_netns, initargs=(self.holder.pid,))
        self.processes: list[subprocess.Popen[bytes]] = []
        self.servers: list[ThreadingHTTPServer] = []

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """Call ``function`` in a thread inside the namespace's network."""
        return self.pool.submit(function, *args).result()

    def popen(self, argv: list[str], log_name: str) -> subprocess.Popen[bytes]:
        log = (self.logs / log_name).open("ab")
        process = subprocess.Popen(
            ["nsenter", "-t", str(self.holder.pid), "-n", "-m", "--", *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_clean_env(),
        )
        self.processes.append(process)
        return process

    def serve(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        server = self.run(Server, address, handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers.append(server)
        return server

    def path(self, inside: str) -> str:
        """A path of the namespace's /run as this process sees it (no /var/run symlink here)."""
        return f"/proc/{self.holder.pid}/root/run/{inside.removeprefix('/var/run/').removeprefix('/run/')}"

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET through HAProxy's frontend (*:80 in the namespace)."""

        def request() -> tuple[int, str]:
            conn = http.client.HTTPConnection("127.0.0.1", 80, timeout=timeout)
            try:
                conn.request("GET", path)
                reply = conn.getresponse()
                return reply.status, reply.read().decode()
            finally:
                conn.close()

        return self.run(request)

    def close(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.holder.kill()
        self.holder.wait()


# ---- what runs in the namespace


class TritonStandIn(BaseHTTPRequestHandler):
    """Answers readiness, a plain GET with its own address, and /slow?s=N after N seconds."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/slow":
            time.sleep(float(parse_qs(url.query)["s"][0]))
        body = b"" if url.path == "/v2/health/ready" else self._me().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _me(self) -> str:
        address = self.server.server_address
        assert isinstance(address, tuple)
        return f"{address[0]!s}:{address[1]}"

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class ControllerState:
    instances: list[str] = field(default_factory=list)
    status: int = 200
    tokens: list[str | None] = field(default_factory=list)
    requests: int = 0


def controller_handler(state: ControllerState) -> type[BaseHTTPRequestHandler]:
    class FakeController(QuietHandler):
        def do_GET(self) -> None:
            state.requests += 1
            state.tokens.append(self.headers.get("X-TARN-Token"))
            if urlsplit(self.path).path != "/instances" or self.headers.get("X-TARN-Token") != TOKEN:
                self.send_response(401 if urlsplit(self.path).path == "/instances" else 404)
                self.end_headers()
                return
            reply_text(self, state.status, "".join(f"{i}\n" for i in sorted(state.instances)))

    return FakeController


REGISTRAR = """
import json, sys
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start(20)
for line in sys.stdin:
    verb, name, *rest = line.strip().split(" ", 2)
    path = sys.argv[2] + "/" + name
    if verb == "put":
        zk.create(path, rest[0].strip().encode(), ephemeral=True, makepath=True)
    elif verb == "get":
        print("ok", (zk.get(name)[0] if zk.exists(name) else b"").decode(), flush=True)
        continue
    else:
        zk.delete(path)
    print("ok", flush=True)
"""


def znode(address: str, index: int) -> str:
    ip, port = address.split(":")
    return json.dumps(
        {
            "service": "tarn",
            "instance": f"triton-{index}",
            "host": "worker",
            "ip": ip,
            "http_port": int(port),
            "grpc_port": 8001,
            "metrics_port": 8002,
            "models": ["add_one"],
            "future_key": True,
        }
    )


class Haproxy:
    def __init__(self, ns: Namespace, cfg: Path) -> None:
        self.ns, self.cfg = ns, cfg
        self.api = RuntimeApi(ns.path("/var/run/haproxy.sock"), timeout=2)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start HAProxy; return the time it was started (its socket answers when this returns)."""
        started = time.monotonic()
        self.process = self.ns.popen(["haproxy", "-f", str(self.cfg), "-db"], "haproxy.log")
        wait_until(self._answers, "HAProxy's socket answers", timeout=10)
        return started

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(10)

    def _answers(self) -> bool:
        try:
            return "Name: HAProxy" in self.api.execute("show info")
        except RuntimeApiError:
            return False

    def ready(self) -> set[str]:
        return {str(s.endpoint) for s in self.api.slots(BACKEND) if s.admin is AdminState.READY}

    def serving(self, backend: str = BACKEND) -> set[str]:
        """The slots HAProxy sends requests to now: READY and up by their health check (srv_op_state
        2, which `rise` sets); a test waits for this, not for a sleep of rise x inter."""
        slots = {slot.name for slot in self.api.slots(backend)}
        return {
            f"{s.addr}:{s.port}"
            for s in self.api.servers_state(backend)
            if s.name in slots and s.admin is AdminState.READY and s.operational == 2
        }

    def states(self) -> dict[str, tuple[str, str, int]]:
        return {s.name: (str(s.endpoint), s.admin.value, s.sessions) for s in self.api.slots(BACKEND)}


@dataclass
class Bench:
    ns: Namespace
    tmp: Path
    zipapp: Path
    controller: ControllerState
    sync_process: subprocess.Popen[bytes] | None = None

    def haproxy(self, cfg: Path = SEEDS_CFG) -> Haproxy:
        proxy = Haproxy(self.ns, cfg)
        proxy.start()
        return proxy

    def sync(self, *source: str) -> None:
        argv = [sys.executable, "-I", str(self.zipapp), "haproxy-sync", "--socket", "/var/run/haproxy.sock"]
        self.sync_process = self.ns.popen([*argv, "--backend", BACKEND, *source], "sync.log")

    def sync_from_controller(self, interval: float = 0.3) -> None:
        token_file = self.tmp / "token"
        token_file.write_text(TOKEN + "\n")
        token_file.chmod(0o600)
        url = f"http://{CONTROLLER[0]}:{CONTROLLER[1]}"
        self.sync("--controller-url", url, "--interval", str(interval), "--token-file", str(token_file))

    def log(self) -> str:
        path = self.tmp / "sync.log"
        return path.read_text() if path.exists() else ""


def wait_until(check: Callable[[], object], what: str, timeout: float = 10.0, step: float = 0.02) -> float:
    """Poll ``check`` until it is true; the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with contextlib.suppress(RuntimeApiError):
            if check():
                return time.monotonic() - start
        time.sleep(step)
    raise AssertionError(f"not within {timeout} s: {what}")


@dataclass
class ZooKeeper:
    """A real ZooKeeper in the namespace, and a registrar that writes znodes as the controller does."""

    ensemble: str
    path: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    registrar: subprocess.Popen[str]

    def tell(self, line: str) -> str:
        """``put NAME JSON`` / ``del NAME`` (ephemeral instance znodes), ``get ABSOLUTE-PATH``."""
        assert self.registrar.stdin is not None
        assert self.registrar.stdout is not None
        self.registrar.stdin.write(line + "\n")
        self.registrar.stdin.flush()
        answer = self.registrar.stdout.readline().strip()
        assert answer.startswith("ok"), answer
        return answer.removeprefix("ok").strip()


def start_zookeeper(bench: Bench, path: str = "/services/triton/instances") -> ZooKeeper:
    data = bench.tmp / "zk"
    data.mkdir()
    (bench.tmp / "zoo.cfg").write_text(
        f"tickTime=500\ndataDir={data}\nclientPort={ZOOKEEPER[1]}\nclientPortAddress={ZOOKEEPER[0]}\n"
        "admin.enableServer=false\nmaxSessionTimeout=60000\n"
    )
    java = ["java", "-cp", "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"]
    zk_main = [*java, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(bench.tmp / "zoo.cfg")]
    zookeeper = bench.ns.popen(zk_main, "zookeeper.log")
    ensemble = f"{ZOOKEEPER[0]}:{ZOOKEEPER[1]}"
    registrar = subprocess.Popen(
        [
            "nsenter",
            "-t",
            str(bench.ns.holder.pid),
            "-n",
            "--",
            sys.executable,
            "-c",
            REGISTRAR,
            ensemble,
            path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_clean_env(),
    )
    bench.ns.processes.append(registrar)  # type: ignore[arg-type]
    return ZooKeeper(ensemble, path, zk_main, zookeeper, registrar)


def render_role_cfg(directory: Path, **variables: str) -> Path:
    """The haproxy role's haproxy.cfg (and its server-state saver, beside it) rendered into
    ``directory`` by Ansible from the role's defaults and vars, with the state file in the
    namespace's /run and ``variables`` (``-e``); checked with ``haproxy -c``."""
    out = directory / "haproxy.cfg"
    role = ROOT / "roles" / "haproxy"
    playbook = directory / "render.yml"
    templates = {"haproxy.cfg.j2": out, "tarn-haproxy-save-state.j2": directory / "save-state"}
    play = {
        "name": "Render the haproxy role's configuration",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars_files": [str(role / "defaults" / "main.yml"), str(role / "vars" / "main.yml")],
        "tasks": [
            {
                "name": source,
                "ansible.builtin.template": {
                    "src": str(role / "templates" / source),
                    "dest": str(dest),
                    "mode": "0755" if dest.name == "save-state" else "0644",
                },
            }
            for source, dest in templates.items()
        ],
    }
    playbook.write_text(json.dumps([play]))
    extra = {"haproxy_server_state_file": STATE_FILE, **variables}
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(
        [
            "ansible-playbook",
            *("-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}"),
            *(word for name, value in extra.items() for word in ("-e", f"{name}={value}")),
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checked = subprocess.run(["haproxy", "-c", "-f", str(out)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return out


def demand(zk: ZooKeeper) -> dict[str, float]:
    """What the activator reported to its demand znode ({"held": -1} before it wrote one)."""
    text = zk.tell(f"get {zk.path}.demand")
    return json.loads(text) if text else {"held": -1}


def activator_metrics() -> dict[str, float] | None:
    """The activator's /metrics as name[:outcome] -> value; None while it does not answer (run it
    inside the bench's namespace)."""
    try:
        conn = http.client.HTTPConnection(*ADMIN, timeout=2)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except OSError:
        return None
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            label = sample.labels.get("outcome", "")
            samples[sample.name + (f":{label}" if label else "")] = sample.value
    return samples
