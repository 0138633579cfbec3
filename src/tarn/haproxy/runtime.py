"""A thin client for HAProxy's Runtime API over its Unix stats socket (no socat needed).

The socket must be declared with ``level admin`` (``stats socket /var/run/haproxy.sock mode 660
level admin``). Each command is one connection: HAProxy answers and closes, so a restarted
HAProxy (a new socket at the same path) needs nothing special here.
"""

from __future__ import annotations

import csv
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tarn.errors import TarnError
from tarn.haproxy.plan import AdminState, Command, Endpoint, SetAddress, SetState, Slot


class RuntimeApiError(TarnError):
    """HAProxy's Runtime API refused a command."""


class HaproxyUnavailable(RuntimeApiError):
    """Nothing answers on the stats socket (HAProxy stopped, restarting, or a wrong path)."""


# srv_admin_state bits (HAProxy's SRV_ADMF_*). CMAINT (0x04) only records "disabled" in the
# configuration: it stays set after `set server … state ready` and does not stop traffic.
_FORCED_MAINT, _INHERITED_MAINT, _RESOLUTION_MAINT, _HOSTNAME_MAINT = 0x01, 0x02, 0x20, 0x40
_FORCED_DRAIN, _INHERITED_DRAIN = 0x08, 0x10
_MAINT_BITS = _FORCED_MAINT | _INHERITED_MAINT | _RESOLUTION_MAINT | _HOSTNAME_MAINT
_DRAIN_BITS = _FORCED_DRAIN | _INHERITED_DRAIN

_STAT_SERVER = "4"  # `show stat <proxy> <type mask> <server id>`: 4 = servers


@dataclass(frozen=True)
class ServerState:
    """One line of ``show servers state``."""

    backend: str
    name: str
    addr: str
    port: int
    operational: int  # srv_op_state: 0 stopped, 1 starting, 2 running, 3 stopping
    admin_bits: int

    @property
    def admin(self) -> AdminState:
        return admin_state(self.admin_bits)


def admin_state(bits: int) -> AdminState:
    if bits & _MAINT_BITS:
        return AdminState.MAINT
    if bits & _DRAIN_BITS:
        return AdminState.DRAIN
    return AdminState.READY


def parse_servers_state(text: str) -> list[ServerState]:
    """``show servers state`` (format version 1): one ServerState per server line, in order."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = next((line for line in lines if line.startswith("# ")), None)
    if header is None:
        raise RuntimeApiError(f"unexpected reply to show servers state: {_first_line(text)!r}")
    columns = header[2:].split()
    servers = []
    for line in lines:
        if line.startswith("#") or len(line.split()) < len(columns):
            continue  # the format version line, or a truncated line
        row = dict(zip(columns, line.split(), strict=False))
        servers.append(
            ServerState(
                backend=row["be_name"],
                name=row["srv_name"],
                addr=row["srv_addr"],
                port=int(row["srv_port"]),
                operational=int(row["srv_op_state"]),
                admin_bits=int(row["srv_admin_state"]),
            )
        )
    return servers


def _stat_rows(text: str) -> list[dict[str, str]]:
    """The server rows of ``show stat`` CSV."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise RuntimeApiError(f"unexpected reply to show stat: {_first_line(text)!r}")
    rows = csv.DictReader([lines[0][2:], *lines[1:]])
    return [row for row in rows if row.get("svname") not in (None, "FRONTEND", "BACKEND")]


def parse_sessions(text: str) -> dict[str, int]:
    """Server name -> current sessions (``scur``) from ``show stat`` CSV."""
    return {row["svname"]: int(row["scur"] or 0) for row in _stat_rows(text)}


def parse_backups(text: str) -> set[str]:
    """The backup servers (``bck`` 1) in ``show stat`` CSV: the activator, never a slot."""
    return {row["svname"] for row in _stat_rows(text) if row.get("bck") == "1"}


def slots_from(servers: Sequence[ServerState], sessions: Mapping[str, int]) -> list[Slot]:
    return [
        Slot(
            name=server.name,
            endpoint=Endpoint(server.addr, server.port),
            admin=server.admin,
            sessions=sessions.get(server.name, 0),
        )
        for server in servers
    ]


def render(backend: str, command: Command) -> str:
    """The Runtime API line of a planned command."""
    target = f"{backend}/{command.server}"
    if isinstance(command, SetAddress):
        return f"set server {target} addr {command.endpoint.ip} port {command.endpoint.port}"
    return f"set server {target} state {command.state.value}"


def check_reply(line: str, reply: str) -> None:
    """Raise RuntimeApiError unless ``reply`` is HAProxy's success answer to ``line``."""
    text = reply.strip()
    if " addr " in line:  # "IP changed from …" or "no need to change the addr, …"
        ok = "changed" in text or "no need to change" in text
        ok = ok and not text.startswith(("Invalid", "No such"))
    else:
        ok = text == ""  # set server … state, enable/disable health: silent on success
    if not ok:
        raise RuntimeApiError(f"HAProxy refused {line!r}: {_first_line(text)}")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(empty reply)"


class RuntimeApi:
    """HAProxy's Runtime API on ``socket_path``; every method is one request."""

    def __init__(self, socket_path: str, timeout: float = 5.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def execute(self, line: str) -> str:
        """Send one command line, return HAProxy's whole answer."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(self.timeout)
                conn.connect(self.socket_path)
                conn.sendall(line.encode() + b"\n")
                return _read_all(conn).decode(errors="replace")
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise HaproxyUnavailable(
                f"HAProxy's runtime API at {self.socket_path}: {exc.strerror}; is HAProxy running "
                "with `stats socket … level admin` there?"
            ) from exc
        except PermissionError as exc:
            raise HaproxyUnavailable(
                f"HAProxy's runtime API at {self.socket_path}: {exc.strerror}; "
                "run as a member of the socket's group"
            ) from exc
        except OSError as exc:
            raise HaproxyUnavailable(f"HAProxy's runtime API at {self.socket_path}: {exc}") from exc

    def servers_state(self, backend: str) -> list[ServerState]:
        reply = self.execute(f"show servers state {backend}")
        if "Can't find backend" in reply or "No such backend" in reply:
            raise RuntimeApiError(f"HAProxy has no backend {backend!r}")
        return [s for s in parse_servers_state(reply) if s.backend == backend]

    def slots(self, backend: str) -> list[Slot]:
        """The backend's slots now, in configuration order, with their current sessions. Its
        backup servers (the activator) are not slots: the sync leaves them alone."""
        stat = self.execute(f"show stat {backend} {_STAT_SERVER} -1")
        backups = parse_backups(stat)
        servers = [server for server in self.servers_state(backend) if server.name not in backups]
        return slots_from(servers, parse_sessions(stat))

    def set_address(self, backend: str, server: str, endpoint: Endpoint) -> None:
        self.apply(backend, SetAddress(server, endpoint, ""))

    def set_state(self, backend: str, server: str, state: AdminState) -> None:
        self.apply(backend, SetState(server, state, ""))

    def apply(self, backend: str, command: Command) -> None:
        line = render(backend, command)
        check_reply(line, self.execute(line))


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)
