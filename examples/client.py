"""Infer the example models through Triton's Open Inference Protocol (HTTP or gRPC) and check them.

    python examples/client.py --url 127.0.0.1:8000 --protocol http
    python examples/client.py --url 127.0.0.1:8001 --protocol grpc
    python examples/client.py --url HOST:8001 --protocol grpc --expect-env FOO=set --expect-env BAR=unset
    TARN_CLIENT_PASSWORD=alice-password python examples/client.py \
        --url knox-host:8443/gateway/tarn-demo/triton --ssl --ca-certs knox.pem --user alice
    kinit alice && python examples/client.py \
        --url knox-host:8443/gateway/tarn-demo-kerberos/triton --ssl --ca-certs knox.pem --kerberos

The last two go through Apache Knox (docs/knox.md): HTTPS, the topology's path in the URL
(tritonclient takes a base path after host:port), and HTTP basic auth against LDAP or, on a
Kerberized cluster, SPNEGO (the ticket from kinit, or $TARN_PRINCIPAL from $TARN_KEYTAB). The
password comes from $TARN_CLIENT_PASSWORD, never from the command line. Knox carries HTTP only.

Waits for the server and the models to be ready (--wait seconds), infers add_one and linear_onnx
and compares the results with the known answers. --expect-env asks the env_probe model whether a
variable is set in Triton's environment (it never returns the value). Exits 0 when everything
matched, 1 on a mismatch, 2 when the server or a model did not become ready.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.http.auth import BasicAuth

from tarn.stdlib.kerberos import KerberosIdentity

ADD_ONE_INPUT = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
ADD_ONE_EXPECTED = np.array([2.0, 3.0, 4.0, 5.0], dtype=np.float32)
# linear_onnx holds WEIGHTS = [[1, 2], [3, 4], [5, 6], [7, 8]] (examples/model_repository/make_onnx.py).
LINEAR_INPUT = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 1.0]], dtype=np.float32)
LINEAR_EXPECTED = np.array([[50.0, 60.0], [7.0, 8.0]], dtype=np.float32)
MODELS = ("add_one", "linear_onnx")


class Client:
    """The few calls this script needs, the same over HTTP and gRPC."""

    def __init__(
        self,
        url: str,
        protocol: str,
        timeout: float,
        ca_certs: str | None = None,
        ssl: bool = False,
        auth: Callable[[Any], None] | None = None,
    ) -> None:
        self.protocol = protocol
        self.module: Any = httpclient if protocol == "http" else grpcclient
        if protocol == "http":
            self.client: Any = httpclient.InferenceServerClient(
                url=url, connection_timeout=timeout, network_timeout=timeout, ssl=ssl,
                ssl_options={"ca_certs": ca_certs} if ca_certs else None,
            )  # fmt: skip
            if auth:
                self.client.register_plugin(auth)
        else:
            certificates = Path(ca_certs).read_text(encoding="ascii") if ca_certs else None
            self.client = grpcclient.InferenceServerClient(url=url, ssl=ssl, root_certificates=certificates)

    def ready(self, model: str | None = None) -> bool:
        try:
            if model is None:
                return bool(self.client.is_server_ready())
            return bool(self.client.is_model_ready(model))
        except Exception:  # not reachable yet counts as not ready
            return False

    def infer(self, model: str, inputs: dict[str, np.ndarray], output: str, datatype: str) -> np.ndarray:
        tensors = []
        for name, value in inputs.items():
            tensor = self.module.InferInput(name, list(value.shape), datatype)
            tensor.set_data_from_numpy(value)
            tensors.append(tensor)
        outputs = [self.module.InferRequestedOutput(output)]
        result = self.client.infer(model, inputs=tensors, outputs=outputs)
        array = result.as_numpy(output)
        if array is None:
            raise RuntimeError(f"{model}: no {output} in the response")
        return np.asarray(array)


class Negotiate:
    """A tritonclient plugin: ``Authorization: Negotiate`` (SPNEGO) for HTTP/<host> on every request."""

    def __init__(self, host: str, identity: KerberosIdentity) -> None:
        self.host, self.identity = host, identity

    def __call__(self, request: Any) -> None:
        request.headers["Authorization"] = self.identity.negotiate(self.host)


def wait_until(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def parse_expectations(items: list[str]) -> dict[str, str]:
    expected: dict[str, str] = {}
    for item in items:
        name, sep, state = item.partition("=")
        if not sep or not name or state not in ("set", "unset"):
            raise argparse.ArgumentTypeError(f"--expect-env {item!r}: use NAME=set or NAME=unset")
        expected[name] = state
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="127.0.0.1:8000", help="host:port of Triton's HTTP or gRPC endpoint")
    parser.add_argument("--protocol", choices=("http", "grpc"), default="http")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for readiness")
    parser.add_argument("--timeout", type=float, default=10.0, help="HTTP connection/network timeout")
    parser.add_argument("--ssl", action="store_true", help="HTTPS (or gRPC over TLS)")
    parser.add_argument("--ca-certs", help="PEM of the CA (or server certificate) to trust")
    parser.add_argument("--user", help="basic auth user (Knox); password: $TARN_CLIENT_PASSWORD")
    parser.add_argument(
        "--kerberos", action="store_true",
        help="SPNEGO (Knox's Kerberos topology): the kinit ticket, or $TARN_PRINCIPAL from $TARN_KEYTAB",
    )  # fmt: skip
    parser.add_argument(
        "--expect-env",
        action="append",
        default=[],
        metavar="NAME=set|unset",
        help="check with the env_probe model that NAME is set (or unset) in Triton's environment",
    )
    args = parser.parse_args(argv)
    try:
        expected_env = parse_expectations(args.expect_env)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))

    auth: Callable[[Any], None] | None = None
    if (args.user or args.kerberos) and args.protocol != "http":
        parser.error("--user, --kerberos: for HTTP (Knox carries no gRPC); use --protocol http")
    if args.user and args.kerberos:
        parser.error("--user, --kerberos: one or the other (a Knox topology authenticates one way)")
    if args.user:
        password = os.environ.get("TARN_CLIENT_PASSWORD")
        if password is None:
            parser.error("--user: set the password in $TARN_CLIENT_PASSWORD")
        auth = BasicAuth(args.user, password)
    if args.kerberos:
        identity = KerberosIdentity(os.environ.get("TARN_PRINCIPAL"), os.environ.get("TARN_KEYTAB"))
        auth = Negotiate(args.url.partition(":")[0].partition("/")[0], identity)
    client = Client(args.url, args.protocol, args.timeout, args.ca_certs, args.ssl, auth)
    models = [*MODELS, "env_probe"] if expected_env else list(MODELS)
    if not wait_until(client.ready, args.wait):
        print(f"FAIL {args.protocol}://{args.url}: server not ready after {args.wait:.0f} s", file=sys.stderr)
        return 2
    for model in models:
        if not wait_until(functools.partial(client.ready, model), args.wait):
            print(f"FAIL {model}: not ready after {args.wait:.0f} s", file=sys.stderr)
            return 2

    failures = 0

    def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
        nonlocal failures
        ok = got.shape == want.shape and bool(np.array_equal(got, want))
        failures += 0 if ok else 1
        print(f"{'ok  ' if ok else 'FAIL'} {args.protocol} {name}: got {got.tolist()}, want {want.tolist()}")

    check("add_one", client.infer("add_one", {"INPUT0": ADD_ONE_INPUT}, "OUTPUT0", "FP32"), ADD_ONE_EXPECTED)
    check(
        "linear_onnx",
        client.infer("linear_onnx", {"INPUT": LINEAR_INPUT}, "OUTPUT", "FP32"),
        LINEAR_EXPECTED,
    )
    if expected_env:
        names = np.array([name.encode() for name in expected_env], dtype=np.object_)
        got = client.infer("env_probe", {"NAMES": names}, "STATUS", "BYTES")
        states = np.array([bytes(v).decode() for v in got.reshape(-1)])
        check("env_probe", states, np.array(list(expected_env.values())))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
