"""The controller's API with Ranger (--ranger-service): /authorize, the models /instances and
/dashboard show, the Ranger series of /metrics; and without it, nothing filtered and /authorize
``true``. The policies come from a PolicyState set by hand (the refresher has its own tests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.controller.dashboard import render_dashboard
from tarn.controller.observe import Container, Scrape
from tarn.controller.server import Api, serve, with_visible_models
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.state import Documents, PolicyState, polled
from tarn.stdlib.api_token import Secret
from tests.support.ranger_documents import BASIC, USERS
from tests.unit.test_controller_loop import TOKEN, FakeScraper, call, make

AUTH = {"X-TARN-Token": TOKEN}
MODELS = ("add_one", "add_sub", "linear_onnx")
NOW = 1_750_000_000.0
LOADED = polled(PolicyState(), Documents(BASIC, None, USERS), [], NOW)


class ModelScraper(FakeScraper):
    """Every instance serves MODELS."""

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]:
        return {
            k: replace(s, models=MODELS if s.models is not None else None)
            for k, s in super().scrape_all(containers, want_models).items()
        }


@dataclass
class Served:
    url: str
    policies: list[PolicyState]  # [0] is what the authorizer sees
    now: list[float]

    def get(self, path: str, user: str | None = None, **headers: str) -> tuple[int, str, bytes]:
        sent = {**AUTH, **headers, **({"X-TARN-User": user} if user is not None else {})}
        reply = call(self.url + path, sent)
        return reply.code, reply.headers.get("Content-Type", ""), reply.body


def start(ranger: bool) -> tuple[Served, Any]:
    lab = make(instances=2)
    lab.scraper = ModelScraper(lab.clock)
    lab.controller._scraper = lab.scraper
    lab.ticks(2)
    holder, now = [LOADED], [NOW + 5]
    authorizer = Authorizer(lambda: holder[0], wall=lambda: now[0]) if ranger else None
    server = serve(Api(lab.controller, Secret(TOKEN), authorizer), "127.0.0.1", 0)
    return Served(f"http://127.0.0.1:{server.server_address[1]}", holder, now), server


@pytest.fixture
def ranger() -> Iterator[Served]:
    served, server = start(ranger=True)
    yield served
    server.shutdown()


@pytest.fixture
def plain() -> Iterator[Served]:
    served, server = start(ranger=False)
    yield served
    server.shutdown()


# ---- /authorize


@pytest.mark.parametrize(
    ("query", "user", "answer"),
    [
        ("model=add_one&action=list", "alice", b"true"),
        ("model=add_one&action=infer", "alice", b"true"),
        ("model=add_one&action=metadata", "alice", b"false"),
        ("model=linear_onnx&action=list", "alice", b"false"),
        ("model=linear_onnx&action=list&user=bob", "alice", b"true"),  # user= wins over the header
        ("model=linear_onnx&action=list&user=bob", None, b"true"),
        ("model=ADD_ONE&action=list", "alice", b"true"),  # the service def's ignoreCase
        ("model=add_one&action=list", "carol", b"false"),
    ],
)
def test_authorize_answers_ranger_s_decision(
    ranger: Served, query: str, user: str | None, answer: bytes
) -> None:
    code, content_type, body = ranger.get(f"/authorize?{query}", user)
    assert (code, body) == (200, answer)
    assert content_type.startswith("text/plain")


@pytest.mark.parametrize(
    ("query", "user", "field"),
    [
        ("action=list", "alice", "model: missing"),
        ("model=&action=list", "alice", "model: missing"),
        ("model=add_one", "alice", "action: None is not an access type; give one of infer, metadata, list"),
        ("model=add_one&action=write", "alice", "action: 'write' is not an access type"),
        ("model=add_one&action=_any", "alice", "action: '_any'"),
        ("model=add_one&action=list", None, "user: none given and no X-TARN-User header"),
        ("model=add_one&action=list&user=%01bob", None, "user: not a name"),
        ("model=add_one&action=list&who=bob", "alice", "unknown parameter 'who'"),
        ("model=add_one&action=list&action=infer", "alice", "parameter 'action' given more than once"),
        ("model=" + "m" * 300 + "&action=list", "alice", "model: not a name"),
    ],
)
def test_authorize_bad_requests_name_the_field(
    ranger: Served, query: str, user: str | None, field: str
) -> None:
    code, _type, body = ranger.get(f"/authorize?{query}", user)
    assert code == 400
    assert field in json.loads(body)["error"]


def test_authorize_needs_the_token(ranger: Served) -> None:
    assert call(ranger.url + "/authorize?model=add_one&action=list&user=alice").code == 401
    assert call(ranger.url + f"/authorize?model=add_one&action=list&user=alice&token={TOKEN}").code == 400
    assert call(ranger.url + "/authorize", AUTH, "POST").code == 405


def test_without_policies_every_check_is_denied(ranger: Served) -> None:
    ranger.policies[0] = replace(PolicyState(), error="no Ranger Admin answered", failures=3)
    for user in ("alice", "bob", "admin"):
        for action in ("infer", "metadata", "list"):
            assert ranger.get(f"/authorize?model=add_one&action={action}", user)[2] == b"false"


def test_without_ranger_authorize_is_true_and_checks_its_input(plain: Served) -> None:
    assert plain.get("/authorize?model=anything&action=infer")[:3:2] == (200, b"true")
    assert plain.get("/authorize?model=anything&action=list", "carol")[2] == b"true"
    assert plain.get("/authorize?model=anything&action=write")[0] == 400


# ---- the lists


def listed(served: Served, user: str | None, path: str = "/instances") -> list[list[str]]:
    code, _type, body = served.get(path, user)
    assert code == 200
    return [i["models"] for i in json.loads(body)["instances"]]


def test_instances_show_the_models_the_user_may_list(ranger: Served) -> None:
    assert listed(ranger, "alice") == [["add_one", "add_sub"]] * 2
    assert listed(ranger, "bob") == [["linear_onnx"]] * 2
    assert listed(ranger, "carol") == [[], []]
    assert listed(ranger, None) == [[], []], "no X-TARN-User with Ranger on: no models"
    assert ranger.get("/instances?format=text", "carol")[2] == b"127.0.0.1:8000\n127.0.0.1:8000\n"
    assert ranger.get("/instances", "bad\x7fname")[0] == 400


def test_without_ranger_every_model_is_listed(plain: Served) -> None:
    assert listed(plain, None) == [list(MODELS)] * 2
    assert listed(plain, "carol") == [list(MODELS)] * 2


def test_the_dashboard_shows_the_user_s_models_and_the_policies_health(ranger: Served) -> None:
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert "linear_onnx" in page
    assert "add_one" not in page
    assert "models shown for bob" in page
    assert "Ranger: policies version 3, confirmed 5 s ago" in page
    anonymous = ranger.get("/dashboard")[2].decode()
    assert "linear_onnx" not in anonymous
    assert "no X-TARN-User header: no models shown" in anonymous

    ranger.policies[0] = polled(LOADED, Documents(), ["no Ranger Admin answered"], NOW + 1)
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert '<p class="problem">Ranger: policies version 3 are stale, confirmed 5 s ago; no Ranger' in page
    assert "linear_onnx" in page, "stale policies still decide"
    ranger.policies[0] = PolicyState(error="no Ranger Admin answered")
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert "Ranger: no policies (no Ranger Admin answered); every model is denied" in page
    assert "linear_onnx" not in page


def test_the_dashboard_without_ranger_is_unchanged(plain: Served) -> None:
    page = plain.get("/dashboard")[2].decode()
    assert all(model in page for model in MODELS)
    assert "Ranger" not in page


def test_with_visible_models_asks_once_per_model() -> None:
    lab = make(instances=3)
    lab.scraper = ModelScraper(lab.clock)
    lab.controller._scraper = lab.scraper
    lab.ticks(1)
    asked: list[str] = []

    def may_list(model: str) -> bool:
        asked.append(model)
        return model == "add_sub"

    snap = with_visible_models(lab.controller.snapshot, may_list)
    assert [i.models for i in snap.instances] == [("add_sub",)] * 3
    assert sorted(asked) == sorted(MODELS)


def test_the_per_model_figures_are_cut_to_what_the_user_may_list() -> None:
    lab = make(instances=2)
    lab.ticks(3)
    full = lab.controller.snapshot
    assert [m.model for m in full.models] == ["add_one"]
    assert with_visible_models(full, lambda model: False).models == ()
    assert "add_one" not in render_dashboard(with_visible_models(full, lambda model: False))


# ---- /metrics


def families(served: Served) -> dict[str, Any]:
    text = served.get("/metrics")[2].decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(found: dict[str, Any], name: str) -> float:
    (sample,) = found[name].samples
    return float(sample.value)


def test_ranger_series(ranger: Served) -> None:
    ranger.get("/authorize?model=add_one&action=list", "alice")
    ranger.get("/authorize?model=add_one&action=infer", "carol")
    found = families(ranger)
    assert value(found, "tarn_ranger_policies_loaded") == 1.0
    assert value(found, "tarn_ranger_policies_stale") == 0.0
    assert value(found, "tarn_ranger_policy_version") == 3.0
    assert value(found, "tarn_ranger_policy_age_seconds") == 5.0
    assert value(found, "tarn_ranger_refresh_failures") == 0.0
    decisions = {
        (s.labels["access"], s.labels["decision"]): s.value
        for s in found["tarn_ranger_decisions"].samples
        if s.name == "tarn_ranger_decisions_total"
    }
    assert decisions == {("list", "allowed"): 1.0, ("infer", "denied"): 1.0}

    ranger.policies[0] = replace(PolicyState(), error="down", failures=4)
    found = families(ranger)
    assert (value(found, "tarn_ranger_policies_loaded"), value(found, "tarn_ranger_policy_version")) == (
        0.0,
        -1.0,
    )
    assert value(found, "tarn_ranger_refresh_failures") == 4.0
    assert "tarn_ranger_policy_age_seconds" not in found
    for name, family in found.items():  # a decision's figures never say who asked for which model
        for sample in family.samples:
            assert name.startswith("tarn_model_") or not {"user", "model"} & set(sample.labels), sample
            assert "user" not in sample.labels, sample


def test_no_ranger_series_without_ranger(plain: Served) -> None:
    assert not [name for name in families(plain) if name.startswith("tarn_ranger")]
