"""`tarn haproxy-sync` (the zipapp the haproxy role installs) against a real HAProxy.

Every test runs in network and mount namespaces of its own (``unshare --net --mount``, a tmpfs on
/run): HAProxy binds the seeds' ``*:80`` and ``/var/run/haproxy.sock`` there and touches nothing
on this machine. In the namespace, on loopback only: HAProxy with the seeds' exact haproxy.cfg
(or the role's), Triton stand-ins on 127.0.0.11-15:8000 answering /v2/health/ready, a fake
controller serving /instances on 127.0.0.2:8888, and for the ZooKeeper source a real ZooKeeper
(Debian's package) on 127.0.0.3:2181 with a registrar that writes instance znodes.

The test process reaches the namespace through worker threads that joined its network namespace
(setns) and through /proc/<pid>/root for the socket.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest

from tarn import payload
from tarn.haproxy.plan import AdminState, Endpoint
from tarn.haproxy.runtime import RuntimeApi, RuntimeApiError

ROOT = Path(__file__).resolve().parents[2]
SEEDS_CFG = Path(__file__).parent / "fixtures" / "seeds-haproxy.cfg"
BACKEND = "triton_backend"
TOKEN = "it-token-7d1f"  # noqa: S105 - a test token; the test checks it is sent and never logged
CONTROLLER = ("127.0.0.2", 8888)
ZOOKEEPER = ("127.0.0.3", 2181)
INSTANCES = [f"127.0.0.{n}:8000" for n in range(11, 16)]
STATE_FILE = "/run/haproxy-server-state"  # in the namespace's private /run
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


@pytest.fixture(scope="module", autouse=True)
def tools() -> None:
    for tool in ("haproxy", "unshare", "nsenter", "ip", "java"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: make deps installs it")
    if os.geteuid() != 0:
        pytest.fail("these tests make network namespaces: run them as root")


def _enter_netns(pid: int) -> None:
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
        self.pool = ThreadPoolExecutor(8, initializer=_enter_netns, initargs=(self.holder.pid,))
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
    class FakeController(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests += 1
            state.tokens.append(self.headers.get("X-TARN-Token"))
            if urlsplit(self.path).path != "/instances" or self.headers.get("X-TARN-Token") != TOKEN:
                self.send_response(401 if urlsplit(self.path).path == "/instances" else 404)
                self.end_headers()
                return
            body = "".join(f"{i}\n" for i in sorted(state.instances)).encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

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


# ---- the pieces under test


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

    def states(self) -> dict[str, tuple[str, str, int]]:
        return {s.name: (str(s.endpoint), s.admin.value, s.sessions) for s in self.api.slots(BACKEND)}


@pytest.fixture(scope="module")
def zipapp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("payload") / "tarn.pyz"
    path.write_bytes(payload.controller_zipapp())
    return path


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


@pytest.fixture
def bench(tmp_path: Path, zipapp: Path) -> Iterator[Bench]:
    ns = Namespace(tmp_path)
    state = ControllerState()
    try:
        for address in INSTANCES:
            host, port = address.split(":")
            ns.serve((host, int(port)), TritonStandIn)
        ns.serve(CONTROLLER, controller_handler(state))
        yield Bench(ns, tmp_path, zipapp, state)
    finally:
        ns.close()
        for name in ("sync.log", "haproxy.log"):
            if (tmp_path / name).exists():
                print(f"---- {name}\n{(tmp_path / name).read_text()[-4000:]}")


def wait_until(check: Callable[[], object], what: str, timeout: float = 10.0, step: float = 0.02) -> float:
    """Poll ``check`` until it is true; the seconds it took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with contextlib.suppress(RuntimeApiError):
            if check():
                return time.monotonic() - start
        time.sleep(step)
    raise AssertionError(f"not within {timeout} s: {what}")


# ---- the tests


def test_controller_source_fills_the_seeds_slots(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES[:3]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three slots serve the three instances")
    states = proxy.states()
    assert [states[f"triton-{n}"][:2] for n in (1, 2, 3)] == [(a, "ready") for a in INSTANCES[:3]]
    assert states["triton-4"] == ("0.0.0.0:8000", "maint", 0)

    answers = {bench.ns.get("/v2/models")[1] for _round in range(9)}
    assert answers == set(INSTANCES[:3])  # round robin through the frontend reaches each instance

    assert set(bench.controller.tokens) == {TOKEN}
    time.sleep(1.5)  # a few quiet rounds
    assert proxy.states() == states  # stable: no churn when nothing changes
    assert TOKEN not in bench.log()
    assert bench.log().count("new instance") == 3 * 2  # address + ready, once each


def test_gone_instance_drains_then_goes_to_maintenance(bench: Bench) -> None:
    proxy = bench.haproxy()
    first, second = INSTANCES[0], INSTANCES[1]
    bench.controller.instances = [first]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == {first}, "the first instance is served")

    slow = bench.ns.pool.submit(lambda: bench.ns.get("/slow?s=2.5"))
    wait_until(lambda: proxy.states()["triton-1"][2] == 1, "the slow request holds a session")
    bench.controller.instances = [second]  # the first goes away while it still serves a request

    wait_until(lambda: proxy.states()["triton-1"][1] == "drain", "the first slot drains")
    assert proxy.states()["triton-1"] == (first, "drain", 1)
    wait_until(lambda: proxy.ready() == {second}, "the second instance takes a free slot")
    assert proxy.states()["triton-2"][:2] == (second, "ready")

    assert slow.result(timeout=10) == (200, first)  # draining lets the running request finish
    took = wait_until(lambda: proxy.states()["triton-1"][1] == "maint", "the idle slot goes to maintenance")
    assert took < 2.0
    assert bench.ns.get("/v2/models") == (200, second)


def test_more_instances_than_slots_is_reported(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES  # five instances, the seeds' four slots
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:4]), "the four slots are filled")
    wait_until(lambda: "no free slot" in bench.log(), "the overflow is logged")
    time.sleep(1.2)
    assert bench.log().count("no free slot") == 1  # once, not every second
    assert f"1 instances have no free slot in backend {BACKEND}: {INSTANCES[4]}" in bench.log()

    bench.controller.instances = INSTANCES[1:]  # one leaves: its slot drains, then takes the fifth
    wait_until(lambda: proxy.ready() == set(INSTANCES[1:]), "the fifth instance gets the freed slot", 5)
    assert "every instance has a slot" in bench.log()


def test_a_controller_outage_keeps_the_backend(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES[:2]
    bench.sync_from_controller(interval=0.2)
    wait_until(lambda: proxy.ready() == set(INSTANCES[:2]), "two instances served")

    bench.controller.status = 503
    asked = bench.controller.requests
    wait_until(lambda: bench.controller.requests >= asked + 5, "the sync keeps asking")
    assert proxy.ready() == set(INSTANCES[:2])
    assert "unavailable (HTTP 503): keeping the last good set (2 instances" in bench.log()
    assert bench.ns.get("/v2/models")[0] == 200

    bench.controller.status = 200
    bench.controller.instances = INSTANCES[:1]
    wait_until(lambda: proxy.ready() == {INSTANCES[0]}, "the sync follows the controller again")
    assert "answers again" in bench.log()


def test_a_wrong_token_never_empties_the_backend(bench: Bench) -> None:
    proxy = bench.haproxy()
    token_file = bench.tmp / "wrong"
    token_file.write_text("wrong\n")
    url = f"http://{CONTROLLER[0]}:{CONTROLLER[1]}"
    bench.controller.instances = INSTANCES[:2]
    bench.sync("--controller-url", url, "--interval", "0.2", "--token-file", str(token_file))
    wait_until(lambda: "the token was refused" in bench.log(), "the refusal is logged")
    assert proxy.ready() == set()
    assert "no instance set known yet, HAProxy is left as it is" in bench.log()


@pytest.fixture(scope="module")
def role_cfg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The haproxy role's haproxy.cfg, rendered by Ansible from the role's defaults and vars."""
    out = tmp_path_factory.mktemp("role") / "haproxy.cfg"
    role = ROOT / "roles" / "haproxy"
    playbook = out.parent / "render.yml"
    playbook.write_text(
        json.dumps(
            [
                {
                    "name": "Render the haproxy role's configuration",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars_files": [str(role / "defaults" / "main.yml"), str(role / "vars" / "main.yml")],
                    "tasks": [
                        {
                            "name": "haproxy.cfg",
                            "ansible.builtin.template": {
                                "src": str(role / "templates" / "haproxy.cfg.j2"),
                                "dest": str(out),
                                "mode": "0644",
                            },
                        },
                        {
                            "name": "the server-state saver",
                            "ansible.builtin.template": {
                                "src": str(role / "templates" / "tarn-haproxy-save-state.j2"),
                                "dest": str(out.parent / "save-state"),
                                "mode": "0755",
                            },
                        },
                    ],
                }
            ]
        )
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(
        [
            "ansible-playbook",
            *("-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}"),
            *("-e", "haproxy_slots=6", "-e", f"haproxy_server_state_file={STATE_FILE}", str(playbook)),
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


def test_role_config_has_the_slots_and_checks(role_cfg: Path) -> None:
    text = role_cfg.read_text()
    assert [*(f"triton-{n}" for n in range(1, 7)), "activator"] == [
        line.split()[1] for line in text.splitlines() if line.strip().startswith("server ")
    ]
    for line in (
        "stats socket /var/run/haproxy.sock mode 660 level admin group haproxy expose-fd listeners",
        "option httpchk GET /v2/health/ready",
        "http-check expect status 200",
        "option redispatch",
        "default-server check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down",
        "server activator 127.0.0.1:8099 backup no-check",
    ):
        assert line in text


@pytest.mark.parametrize("config", ["seeds", "role"])
def test_haproxy_restart_restores_the_backend(
    bench: Bench, config: str, request: pytest.FixtureRequest
) -> None:
    cfg = SEEDS_CFG if config == "seeds" else request.getfixturevalue("role_cfg")
    proxy = bench.haproxy(cfg)
    bench.controller.instances = INSTANCES[:3]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three instances served")

    proxy.stop()
    wait_until(lambda: "retrying" in bench.log(), "the sync notices HAProxy is gone")
    time.sleep(1.5)  # gone for a while: the sync keeps retrying without filling its log
    assert bench.log().count("retrying") == 1

    started = proxy.start()
    socket_up = time.monotonic() - started
    restored = wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "the backend is restored") + socket_up
    serving = wait_until(lambda: bench.ns.get("/v2/models", timeout=1)[0] == 200, "traffic flows") + restored
    print(
        f"\n[{config} cfg] after the HAProxy restart: socket up {socket_up:.2f} s, "
        f"slots restored {restored:.2f} s, first 200 through the frontend {serving:.2f} s"
    )
    assert restored < 2.0
    assert serving < 2.0
    assert "HAProxy answers again" in bench.log()


def test_a_reload_keeps_the_backend_without_the_sync(bench: Bench, role_cfg: Path) -> None:
    """The role's reload (Debian's unit + the drop-in: save the states, then USR2 to the master)
    under a constant load, with no sync running to repair anything: every slot keeps its
    address and state, and no request fails."""
    assert shutil.which("socat"), "the state saver talks to HAProxy's socket with socat: apt install socat"
    proxy = Haproxy(bench.ns, role_cfg)
    proxy.process = bench.ns.popen(["haproxy", "-W", "-db", "-f", str(role_cfg)], "haproxy.log")
    wait_until(proxy._answers, "HAProxy's socket answers")
    for slot, address in enumerate(INSTANCES[:3], start=1):
        host, port = address.split(":")
        proxy.api.set_address(BACKEND, f"triton-{slot}", Endpoint(host, int(port)))
        proxy.api.set_state(BACKEND, f"triton-{slot}", AdminState.READY)
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three instances served")
    wait_until(lambda: bench.ns.get("/v2/models", timeout=1)[0] == 200, "traffic flows")
    before = proxy.states()

    results: list[int] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                results.append(bench.ns.get("/v2/models", timeout=5)[0])
            except OSError:
                results.append(0)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    time.sleep(0.5)
    saver = bench.ns.popen(["sh", str(role_cfg.parent / "save-state")], "save-state.log")
    assert saver.wait(10) == 0
    assert "triton-1" in Path(bench.ns.path(STATE_FILE)).read_text()
    os.kill(proxy.process.pid, signal.SIGUSR2)  # what ExecReload's kill -USR2 $MAINPID does
    seen = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeApiError):
            seen.append(proxy.ready())
        time.sleep(0.02)
    stop.set()
    worker.join()
    failed = sum(1 for code in results if code != 200)
    print(f"\n[role reload] {len(results)} requests, {failed} failed; {len(seen)} reads of the slots")
    assert "Former worker" in (bench.tmp / "haproxy.log").read_text()  # the reload happened
    assert all(ready == set(INSTANCES[:3]) for ready in seen)
    assert {k: v[:2] for k, v in proxy.states().items()} == {k: v[:2] for k, v in before.items()}
    assert failed == 0
    assert len(results) > 50


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


def test_zookeeper_source_follows_the_znodes(bench: Bench) -> None:
    zk = start_zookeeper(bench)
    ensemble, path, zk_main, zookeeper, tell = zk.ensemble, zk.path, zk.argv, zk.process, zk.tell
    proxy = bench.haproxy()
    bench.sync("--zk-ensemble", ensemble, "--zk-path", path)
    tell(f"put container_1 {znode(INSTANCES[0], 0)}")
    tell(f"put container_2 {znode(INSTANCES[1], 1)}")
    tell("put container_junk {not json")
    wait_until(lambda: proxy.ready() == set(INSTANCES[:2]), "two znodes, two slots", 15)
    assert "ignoring znode /services/triton/instances/container_junk" in bench.log()

    start = time.monotonic()
    tell("del container_1")
    wait_until(lambda: proxy.ready() == {INSTANCES[1]}, "a removed znode drains its slot", 5)
    pushed = time.monotonic() - start
    wait_until(lambda: proxy.states()["triton-1"][1] == "maint", "then maintenance", 5)
    print(f"\n[zookeeper] znode removed -> slot drained in {pushed:.2f} s (watch, no polling)")
    assert pushed < 1.5

    zookeeper.terminate()
    zookeeper.wait(10)
    wait_until(lambda: "keeping the last good set (1 instances" in bench.log(), "the outage is logged", 15)
    time.sleep(1.0)
    assert proxy.ready() == {INSTANCES[1]}  # ZooKeeper down: the backend stays as it was

    bench.ns.popen(zk_main, "zookeeper.log")  # back, same data: the sessions resume
    wait_until(lambda: "answers again" in bench.log(), "the sync reads ZooKeeper again", 30)
    tell(f"put container_3 {znode(INSTANCES[2], 2)}")
    wait_until(lambda: proxy.ready() == set(INSTANCES[1:3]), "a new znode after the outage", 10)
