"""The registry plan (what to create, update and delete under the instances' path) and the znode's
data; the ZooKeeper side is tests/integration/test_registry_takeover.py's."""

from __future__ import annotations

from tarn.controller.registry import Present, RegistryPlan, plan_registry, znode_data


def test_registry_plan_creates_updates_deletes_and_takes_over() -> None:
    mine, old = 7, 3
    present = {
        "c1": Present(owner=mine, service="svc"),  # ours, unchanged
        "c2": Present(owner=mine, service="svc"),  # ours, data changed
        "c3": Present(owner=old, service="svc"),  # an earlier controller's session
        "c4": Present(owner=mine, service="svc"),  # no longer ready
        "x9": Present(owner=11, service="other"),  # another service under the same path
    }
    written = {"c1": b"1", "c2": b"old", "c4": b"4"}
    wanted = {"c1": b"1", "c2": b"new", "c3": b"3", "c5": b"5"}
    plan = plan_registry(present, written, wanted, service="svc", session=mine)
    assert plan == RegistryPlan(create=("c3", "c5"), update=("c2",), delete=("c3", "c4"))


def test_registry_plan_is_empty_when_in_sync() -> None:
    present = {"c1": Present(owner=1, service="svc")}
    assert not plan_registry(present, {"c1": b"d"}, {"c1": b"d"}, service="svc", session=1)


def test_znode_data_is_canonical_json() -> None:
    assert znode_data({"b": 1, "a": "x"}) == b'{"a":"x","b":1}'
