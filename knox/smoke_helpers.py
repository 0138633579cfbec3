"""Loopback stand-ins for knox/smoke.sh: a fake Triton, TARN's /authorize, TARN's registration.

    python3 smoke_helpers.py freeport
    python3 smoke_helpers.py triton PORT NAME LOGFILE     # /v2, /v2/health/ready, add_one infer
    python3 smoke_helpers.py authorize PORT TOKENFILE LOGFILE   # alice may infer add_one only
    python3 smoke_helpers.py register ZK PATH SERVICE CONTAINER PORT...  # TARN's own Registry

``register`` writes the znodes with TARN's controller code (tarn.controller.registry: ephemeral,
its JSON) and holds the session until it is killed, as a controller does.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def freeport() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_line(path: str, record: dict[str, object]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def triton(port: int, name: str, logfile: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Fake-Triton", name)
            self.end_headers()
            self.wfile.write(body)

        def _record(self, body: bytes = b"") -> None:
            log_line(
                logfile,
                {
                    "backend": name,
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "cookie": self.headers.get("Cookie"),
                    "content_type": self.headers.get("Content-Type"),
                    "body_len": len(body),
                },
            )

        def do_GET(self) -> None:
            self._record()
            path = urlsplit(self.path).path
            if path in ("/v2/health/ready", "/v2/health/live"):
                self._send(200, b"", "text/plain")
            elif path == "/v2":
                self._send(
                    200, json.dumps({"name": "triton", "version": "2.x-fake", "backend": name}).encode()
                )
            elif path == "/metrics":
                self._send(200, b"nv_inference_count 1\n", "text/plain")
            else:
                self._send(404, json.dumps({"error": "not found"}).encode())

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._record(body)
            if self.headers.get("Inference-Header-Content-Length") is not None:
                # binary tensor extension: answer the request's bytes unchanged, and its framing
                head = int(self.headers["Inference-Header-Content-Length"])
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Inference-Header-Content-Length", str(head))
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Fake-Triton", name)
                self.send_header("X-Request-Content-Length", str(self.headers.get("Content-Length")))
                self.end_headers()
                self.wfile.write(body)
                return
            if urlsplit(self.path).path != "/v2/models/add_one/infer":
                self._send(404, json.dumps({"error": "unknown model"}).encode())
                return
            req = json.loads(body)
            data = [x + 1 for x in req["inputs"][0]["data"]]
            out = {
                "model_name": "add_one",
                "model_version": "1",
                "backend": name,
                "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [len(data)], "data": data}],
            }
            self._send(200, json.dumps(out).encode())

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def authorize(port: int, tokenfile: str, logfile: str) -> None:
    with open(tokenfile, encoding="utf-8") as f:
        token = f.read().strip()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(parts.query).items()}
            log_line(
                logfile, {"path": parts.path, **q, "token_ok": self.headers.get("X-TARN-Token") == token}
            )
            if parts.path != "/authorize":
                code, body = 404, b"not found"
            elif self.headers.get("X-TARN-Token") != token:
                code, body = 401, b"token required"
            elif not q.get("model") or q.get("action") not in ("infer", "metadata", "list"):
                code, body = 400, b"model: missing or action: bad"
            else:
                ok = (
                    q.get("user") == "alice"
                    and q["model"] == "add_one"
                    and q["action"] in ("infer", "metadata")
                )
                code, body = 200, b"true" if ok else b"false"
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def register(ensemble: str, path: str, service: str, container: str, ports: list[int]) -> None:
    from tarn.controller.registry import Registry, znode_data

    registry = Registry(ensemble, path, service)
    registry.start()
    wanted = {}
    for i, port in enumerate(ports):
        cid = f"{container}_{i:06d}"
        wanted[cid] = znode_data(
            {
                "service": service,
                "instance": f"triton-{i}",
                "container_id": cid,
                "host": "localhost",
                "ip": "127.0.0.1",
                "http_port": port,
                "grpc_port": port + 1,
                "metrics_port": port + 2,
                "url": f"http://127.0.0.1:{port}",
                "models": ["add_one"],
            }
        )
    registry.sync(wanted)
    print("registered", sorted(wanted), flush=True)
    while True:
        time.sleep(3600)


def main(argv: list[str]) -> None:
    cmd = argv[1]
    if cmd == "freeport":
        print(freeport())
    elif cmd == "triton":
        triton(int(argv[2]), argv[3], argv[4])
    elif cmd == "authorize":
        authorize(int(argv[2]), argv[3], argv[4])
    elif cmd == "register":
        register(argv[2], argv[3], argv[4], argv[5], [int(p) for p in argv[6:]])
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
