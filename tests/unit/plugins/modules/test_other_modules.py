"""tarn_scale, tarn_info and tarn_model_repository against fakes; every module's documentation renders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.tarn.yarn.plugins.modules import tarn_info, tarn_model_repository, tarn_scale

from tarn import models
from tarn.stdlib.webhdfs import FileChecksum, FileStatus

from ..conftest import FakeHdfs, FakeRM
from .test_tarn_deploy import BASE, deployed

ROOT = Path(__file__).resolve().parents[4]
CONNECTION = {k: BASE[k] for k in ("service_name", "user", "rm_url", "webhdfs_url")}


@pytest.mark.parametrize(
    ("count", "extra", "check", "changed", "calls", "bounds"),
    [
        (1, {"count": 1}, False, False, [], (1, 2)),
        (1, {"count": 2}, False, True, ["flex"], (1, 2)),
        (1, {"count": 2}, True, True, [], (1, 2)),
        (2, {"max_instances": 2}, False, False, [], (1, 2)),
        (2, {"max_instances": 4}, False, True, ["upgrade", "upgrade-instance"], (1, 4)),
        (
            2,
            {"min_instances": 1, "max_instances": 1},
            False,
            True,
            ["upgrade", "upgrade-instance", "flex"],
            (1, 1),
        ),
        (1, {"min_instances": 2}, True, True, [], (2, 2)),
    ],
)
def test_scale(run_module, count, extra, check, changed, calls, bounds) -> None:
    rm = FakeRM(deployed(count))
    result = run_module(tarn_scale, {**CONNECTION, **extra}, rm, check_mode=check, diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is changed
    assert [c[0] for c in rm.calls] == calls
    assert (result["bounds"]["min_instances"], result["bounds"]["max_instances"]) == bounds
    if changed and not check and "max_instances" in extra:
        launch = (rm.service("mod-unit") or {})["components"][0]["launch_command"]
        assert f"--max-instances {bounds[1]}" in launch


def test_scale_needs_the_service(run_module) -> None:
    result = run_module(tarn_scale, {**CONNECTION, "count": 2}, FakeRM())
    assert result["failed"]
    assert "no service 'mod-unit'" in result["msg"]


@pytest.mark.parametrize(
    ("existing", "answer", "exists", "load"),
    [
        (None, None, False, None),
        (deployed(2), {"instances": [{"state": "READY", "registered": True, "load": 0.5},
                                     {"state": "DRAINING", "registered": False, "load": 0.1}]}, True, 0.3),
        (deployed(1), RuntimeError, True, None),
    ],
)  # fmt: skip
def test_info(run_module, monkeypatch: pytest.MonkeyPatch, existing, answer, exists, load) -> None:
    from tarn.clients import controller
    from tarn.errors import ClusterError

    def instances(self: Any) -> dict[str, Any]:
        if answer is RuntimeError:
            raise ClusterError("controller GET /instances: ConnectionError")
        return dict(answer)

    monkeypatch.setattr(controller.ControllerClient, "instances", instances)
    result = run_module(tarn_info, {**CONNECTION, "token": "t0k3n"}, FakeRM(existing))
    assert result["exists"] is exists
    assert result["changed"] is False
    if load is not None:
        assert result["load"]["mean_load"] == pytest.approx(load)
        assert result["load"]["registered"] == 1
        assert result["load"]["states"] == {"READY": 1, "DRAINING": 1}
    elif exists:
        assert "ConnectionError" in result["controller_error"]


class RepositoryHdfs(FakeHdfs):
    """WebHDFS listing and checksums over the fake's files (checksums as HDFS computes them)."""

    BLOCK = 128 << 20

    def walk(self, path: str, missing_ok: bool = False) -> list[FileStatus]:
        return [
            FileStatus(p, "FILE", len(data), self.BLOCK, 0) for p, data in sorted(self.files.items())
            if p.startswith(path + "/")
        ]  # fmt: skip

    def checksum(self, path: str) -> FileChecksum:
        from tarn.stdlib.hdfs_checksum import Md5Md5CrcHasher

        hasher = Md5Md5CrcHasher("CRC32C", 512, self.BLOCK)
        hasher.update(self.files[path])
        raw = (512).to_bytes(4, "big") + (0).to_bytes(8, "big") + hasher.digest()
        return FileChecksum("MD5-of-0MD5-of-512CRC32C", raw.hex(), 28)


@pytest.mark.parametrize(
    ("remote", "purge", "check", "actions"),
    [
        ({}, False, False, {"a/1/model.py": "create", "a/config.pbtxt": "create"}),
        ({"a/1/model.py": b"print(1)\n", "a/config.pbtxt": b"name: 'a'\n"}, False, False,
         {"a/1/model.py": "unchanged", "a/config.pbtxt": "unchanged"}),
        ({"a/1/model.py": b"print(2)\n", "a/config.pbtxt": b"name: 'a'\n"}, False, False,
         {"a/1/model.py": "update", "a/config.pbtxt": "unchanged"}),
        ({"a/1/model.py": b"print(2)\n", "a/config.pbtxt": b"name: 'a'\n", "old.txt": b"x"}, True, True,
         {"a/1/model.py": "update", "a/config.pbtxt": "unchanged", "old.txt": "delete"}),
    ],
)  # fmt: skip
def test_model_repository(run_module, tmp_path: Path, remote, purge, check, actions) -> None:
    (tmp_path / "a" / "1").mkdir(parents=True)
    (tmp_path / "a" / "1" / "model.py").write_bytes(b"print(1)\n")  # same size as print(2)
    (tmp_path / "a" / "config.pbtxt").write_bytes(b"name: 'a'\n")
    hdfs = RepositoryHdfs()
    hdfs.files = {f"/m/{k}": v for k, v in remote.items()}
    before = dict(hdfs.files)
    args = {**CONNECTION, "src": str(tmp_path), "dest": "/m", "purge": purge}
    result = run_module(tarn_model_repository, args, FakeRM(), hdfs, check_mode=check, diff=True)
    assert {f["path"]: f["action"] for f in result["files"]} == actions
    assert result["changed"] is any(a != "unchanged" for a in actions.values())
    if check:
        assert hdfs.files == before
    else:
        assert {k.removeprefix("/m/") for k in hdfs.files} == {p for p, a in actions.items() if a != "delete"}
        assert hdfs.files["/m/a/1/model.py"] == b"print(1)\n"


def test_load_in_place_sends_every_file_but_the_config(tmp_path: Path) -> None:
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "model.py").write_bytes(b"v2")
    (tmp_path / "config.pbtxt").write_bytes(b"name: 'a'")
    sent: list[tuple[str, dict[str, bytes]]] = []

    class Triton:
        def load_model(self, model: str, files: dict[str, bytes]) -> None:
            sent.append((model, files))

    endpoints = [models.Endpoint("triton-0", "w1", 8000), models.Endpoint("triton-1", "w2", 8000)]
    fake = Triton()
    loaded = models.load_in_place(endpoints, "a", tmp_path, triton=lambda e: fake)  # type: ignore[arg-type,return-value]
    assert loaded == ["triton-0", "triton-1"]
    assert sent == [("a", {"2/model.py": b"v2"})] * 2


@pytest.mark.parametrize("module", ["tarn_deploy", "tarn_scale", "tarn_info", "tarn_model_repository"])
def test_ansible_doc_renders(module: str) -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "build" / "collections")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), f"tarn.yarn.{module}"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "OPTIONS" in done.stdout
    assert "EXAMPLES" in done.stdout
    assert "RETURN VALUES" in done.stdout


def test_service_fragment_documents_the_argument_spec() -> None:
    import yaml
    from ansible_collections.tarn.yarn.plugins.doc_fragments.service import ModuleDocFragment
    from ansible_collections.tarn.yarn.plugins.module_utils.common import SERVICE_OPTIONS

    documented = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    assert list(documented) == list(SERVICE_OPTIONS)
    for name, (spec, _flag) in SERVICE_OPTIONS.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("elements") == spec.get("elements"), name
        assert documented[name].get("choices") == spec.get("choices"), name


def test_every_cli_flag_is_a_module_option() -> None:
    from ansible_collections.tarn.yarn.plugins.module_utils.common import SERVICE_OPTIONS

    from tarn.stdlib.config import ConfigArgumentParser, add_config_arguments

    parser = ConfigArgumentParser(prog="tarn")
    add_config_arguments(parser)
    flags = {a.option_strings[0] for a in parser._actions if a.option_strings and a.option_strings[0] != "-h"}
    covered = {flag for _spec, flag in SERVICE_OPTIONS.values() if flag} | {
        "--service-name",
        "--user",
        "--jar",
    }
    covered |= {"--anti-affinity", "--tensor-parallelism", "--pipeline-parallelism"}
    assert flags - covered - {"--no-anti-affinity"} == set(), "module options missing for these CLI flags"


def test_the_modules_wait_as_long_as_an_instance_may_take_to_start() -> None:
    """One readiness budget: a deploy's or a scale's wait for READY is the controller's default
    bound before it replaces an instance that stays unready (--replace-unready-after)."""
    import yaml
    from ansible_collections.tarn.yarn.plugins.modules import tarn_deploy

    from tarn.service.options import Options
    from tarn.stdlib.config import READY_BUDGET_S, default_of

    assert default_of("replace_unready_after_s") == READY_BUDGET_S
    assert Options().timeout == READY_BUDGET_S
    for module in (tarn_deploy, tarn_scale):
        documented = yaml.safe_load(module.DOCUMENTATION)["options"]["wait_timeout"]["default"]
        assert documented == READY_BUDGET_S, module.__name__
