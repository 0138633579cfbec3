"""Ranger decisions: TARN's policy engine with 1,000 policies against 10 (the baseline, same
run): evaluate() latency p50/p99 and decisions per second, as the controller's /authorize and
its model filtering call it; then the same decisions through the controller's real HTTP API
(GET /authorize on loopback, one client, a connection per request as http.server answers).
Target (issue 12): p99 <= 1 ms in the engine with 1,000 policies, so a gateway can ask per request.

The policies mix what operators write: exact model names, prefixes and wildcards, group and
user items, denies with exceptions, OVERRIDE policies, {USER} values and excludes.

    python bench/ranger_authorize.py [--policies 1000] [--requests 20000] [--json PATH]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from tarn.controller.loop import ControlLoop
from tarn.controller.server import Api, serve
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.engine import Engine
from tarn.ranger.state import PolicyState
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import parse_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

# the service type TARN ships (and the role registers), as Ranger Admin serves it to plugins
SERVICE_DEF: dict[str, Any] = json.loads(
    resources.files("tarn.ranger").joinpath("triton-service-def.json").read_text()
)
ACCESSES = ("infer", "metadata", "list")
USERS = [f"user{n}" for n in range(50)]
GOAL_P99_US = 1000  # issue 12: a gateway can ask per request


def item(rng: random.Random) -> dict[str, Any]:
    return {
        "users": rng.sample(USERS, rng.randint(0, 2)) + (["{USER}"] if rng.random() < 0.05 else []),
        "groups": rng.sample([f"team{n}" for n in range(20)], rng.randint(0, 2)),
        "accesses": [{"type": a, "isAllowed": True} for a in rng.sample(ACCESSES, rng.randint(1, 3))],
    }  # fmt: skip


def model_value(rng: random.Random, n: int) -> str:
    roll = rng.random()
    if roll < 0.7:
        return f"model_{n}"
    if roll < 0.9:
        return f"model_{n % 100}*"
    return f"*_{n % 10}?" if roll < 0.97 else "*"


def service_policies(count: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)  # noqa: S311 - benchmark data, not secrets
    found = []
    for n in range(count):
        policy: dict[str, Any] = {
            "id": n + 1, "name": f"p{n}", "isEnabled": True, "isAuditEnabled": rng.random() < 0.5,
            "policyPriority": 1 if rng.random() < 0.02 else 0,
            "resources": {"model": {"values": [model_value(rng, n)], "isExcludes": rng.random() < 0.02}},
            "policyItems": [item(rng) for _n in range(rng.randint(1, 3))],
        }  # fmt: skip
        if rng.random() < 0.1:
            policy["denyPolicyItems"] = [item(rng)]
            policy["denyExceptions"] = [item(rng)] if rng.random() < 0.5 else []
        found.append(policy)
    return {
        "serviceName": "triton_prod", "serviceId": 1, "policyVersion": 1, "serviceDef": SERVICE_DEF,
        "policies": found, "auditMode": "audit-default",
    }  # fmt: skip


def measure(engine: Engine, requests: int, seed: int) -> tuple[list[float], float]:
    """Each decision's seconds, and decisions per second over the whole run."""
    rng = random.Random(seed)  # noqa: S311 - benchmark data, not secrets
    asked = [
        (f"user{rng.randrange(60)}", frozenset({f"team{rng.randrange(25)}"}), f"model_{rng.randrange(1200)}",
         rng.choice(ACCESSES))
        for _n in range(requests)
    ]  # fmt: skip
    took = []
    began = time.perf_counter()
    for user, groups, model, access in asked:
        start = time.perf_counter()
        engine.evaluate(user, groups, model, access)
        took.append(time.perf_counter() - start)
    return took, requests / (time.perf_counter() - began)


def report(label: str, policies: int, requests: int) -> dict[str, float]:
    started = time.perf_counter()
    engine = Engine.from_json(service_policies(policies, seed=policies))
    load_ms = (time.perf_counter() - started) * 1000
    measure(engine, 1000, seed=1)  # warm up
    took, rate = measure(engine, requests, seed=2)
    ordered = sorted(took)
    p50, p99 = statistics.median(ordered) * 1e6, ordered[int(len(ordered) * 0.99)] * 1e6
    print(
        f"{label:>9}: {policies:>5} policies, load {load_ms:6.1f} ms, "
        f"p50 {p50:6.1f} us, p99 {p99:7.1f} us, {rate:9,.0f} decisions/s"
    )
    return {"policies": policies, "load_ms": load_ms, "p50_us": p50, "p99_us": p99, "decisions_per_s": rate}


def report_http(policies: int, requests: int) -> dict[str, float]:
    """/authorize through the controller's API: a control loop that never ticks behind it."""
    engine = Engine.from_json(service_policies(policies, seed=policies))
    config = parse_config(["--model-repository", "hdfs:///m", "--runtime", "process"], {})
    loop = ControlLoop(config, rm=None, registry=None, scraper=None)  # type: ignore[arg-type] # never ticks
    token = "bench-token"  # noqa: S105 - a loopback server of this run
    server = serve(Api(loop, Secret(token), Authorizer(lambda: PolicyState(engine=engine))), "127.0.0.1", 0)
    port = server.server_address[1]
    rng = random.Random(3)  # noqa: S311 - benchmark data, not secrets
    took = []
    began = time.perf_counter()
    try:
        for _n in range(requests):
            model, access, user = rng.randrange(1200), rng.choice(ACCESSES), rng.randrange(60)
            query = f"/authorize?model=model_{model}&action={access}&user=user{user}"
            start = time.perf_counter()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", query, headers={"X-TARN-Token": token})
            answer = connection.getresponse().read()
            connection.close()
            took.append(time.perf_counter() - start)
            assert answer in (b"true", b"false"), answer
    finally:
        server.shutdown()
    rate = requests / (time.perf_counter() - began)
    ordered = sorted(took)
    p50, p99 = statistics.median(ordered) * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3
    print(
        f"{'HTTP':>9}: {policies:>5} policies, p50 {p50:6.2f} ms, p99 {p99:6.2f} ms, {rate:9,.0f} requests/s"
    )
    return {"policies": policies, "p50_ms": p50, "p99_ms": p99, "requests_per_s": rate}


def figures(policies: int, baseline: dict[str, float], measured: dict[str, float]) -> list[Figure]:
    """The engine's p99 and rate with ``policies`` against 10 (the baseline)."""
    p99 = measured["p99_us"]
    return [
        {"name": f"engine p99, {policies} policies", "value": p99, "unit": "us",
         "baseline": baseline["p99_us"], "baseline_name": "10 policies", "goal": f"<= {GOAL_P99_US} us",
         "met": p99 <= GOAL_P99_US},
        {"name": f"engine decisions/s, {policies} policies", "value": measured["decisions_per_s"],
         "unit": "/s", "baseline": baseline["decisions_per_s"], "baseline_name": "10 policies"},
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0] if __doc__ else None)
    parser.add_argument("--policies", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    baseline = report("baseline", 10, args.requests)
    measured = report("measured", args.policies, args.requests)
    p99 = measured["p99_us"]
    verdict = "met" if p99 <= GOAL_P99_US else "NOT met"
    print(f"target: p99 <= 1 ms with {args.policies} policies: {verdict} ({p99 / 1000:.3f} ms)")
    http = report_http(args.policies, min(args.requests, 5000))
    if args.json:
        parameters = {"policies": args.policies, "requests": args.requests}
        samples = {"baseline": baseline, "measured": measured, "http": http}
        found = figures(args.policies, baseline, measured)
        Result("ranger_authorize", found, parameters, samples).write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
