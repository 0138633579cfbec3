"""The registry plan (what to create, update and delete under the instances' path) and the znode's
data; the ZooKeeper side is tests/integration/test_registry_takeover.py's."""

from __future__ import annotations

from kazoo.security import ACL, Id, Permissions

from tarn.controller.registry import (
    Present,
    RegistryPlan,
    demand_acls,
    plan_registry,
    registry_acls,
    sasl_id,
    znode_data,
)


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


# ---- ACLs on a Kerberized cluster (a real ZooKeeper with SASL: tests/integration/test_zookeeper_sasl.py)


def test_the_sasl_id_is_the_principals_first_component() -> None:
    assert sasl_id("tarn/worker1.example.com@EXAMPLE.COM") == "tarn"
    assert sasl_id("tarn@EXAMPLE.COM") == "tarn"
    assert sasl_id("tarn/_HOST@EXAMPLE.COM") == "tarn"
    assert sasl_id("tarn") == "tarn"


def test_tarns_znodes_are_its_principals_to_change_and_anyones_to_read() -> None:
    assert registry_acls("tarn/worker1.example.com@EXAMPLE.COM") == [
        ACL(Permissions.ALL, Id("sasl", "tarn")),
        ACL(Permissions.READ, Id("world", "anyone")),
    ]
    # the activator's demand report: anyone may also write the data, not create or delete
    assert demand_acls("tarn/worker1.example.com@EXAMPLE.COM") == [
        ACL(Permissions.ALL, Id("sasl", "tarn")),
        ACL(Permissions.READ | Permissions.WRITE, Id("world", "anyone")),
    ]
