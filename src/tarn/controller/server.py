"""The controller's HTTP API on --address:--am-port.

So far it answers /health, which YARN's readiness check calls (it needs no token). The control
loop (observe, register in ZooKeeper, scale, /instances, /metrics, /dashboard) comes with the
controller work; until then every other path answers 404.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tarn.config import TarnConfig

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


class ApiHandler(BaseHTTPRequestHandler):
    server_version = "tarn-controller"

    def do_GET(self) -> None:
        if self.path.split("?")[0] == "/health":
            self._reply(200, {"status": "ok"})
        else:
            self._reply(404, {"error": "not found"})

    def _reply(self, status: int, body: dict[str, str]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        for key, value in SECURITY_HEADERS.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass  # request lines may carry ?token=: never log them


def serve(config: TarnConfig) -> None:
    server = ThreadingHTTPServer((config.address, config.am_port), ApiHandler)
    print(f"tarn controller: serving on {config.address}:{config.am_port}", flush=True)
    server.serve_forever()
