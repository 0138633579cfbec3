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


def test_registry_plan_creates_updates_deletes_and_adopts() -> None:
    persistent, ephemeral = 0, 3
    present = {
        "c1": Present(owner=persistent, service="svc"),  # written, unchanged
        "c2": Present(owner=persistent, service="svc"),  # written, data changed
        "c3": Present(owner=persistent, service="svc"),  # an earlier controller's: adopted, rewritten once
        "c4": Present(owner=persistent, service="svc"),  # no longer ready
        "c6": Present(owner=ephemeral, service="svc"),  # an older TARN's ephemeral znode
        "x9": Present(owner=persistent, service="other"),  # another service under the same path
    }
    written = {"c1": b"1", "c2": b"old", "c4": b"4"}
    wanted = {"c1": b"1", "c2": b"new", "c3": b"3", "c5": b"5", "c6": b"6"}
    plan = plan_registry(present, written, wanted, service="svc")
    assert plan == RegistryPlan(create=("c5", "c6"), update=("c2", "c3"), delete=("c6", "c4"))


def test_a_successor_adopts_without_deleting_what_still_serves() -> None:
    """The controller's znodes outlive it: the next one rewrites them in place (no gap for a
    reader), where the old code deleted and recreated every one it found of another session."""
    present = {"c1": Present(owner=0, service="svc"), "c2": Present(owner=0, service="svc")}
    wanted = {"c1": b"1", "c2": b"2"}
    plan = plan_registry(present, {}, wanted, service="svc")
    assert plan == RegistryPlan(update=("c1", "c2"))


def test_registry_plan_is_empty_when_in_sync() -> None:
    present = {"c1": Present(owner=0, service="svc")}
    assert not plan_registry(present, {"c1": b"d"}, {"c1": b"d"}, service="svc")


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
