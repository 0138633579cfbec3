"""`tarn submit --ranger-service`: the ranger-triton-*.xml files of --ranger-conf-dir are checked
where tarn runs, uploaded beside the token and localized into the controller's container, which
reads them with --ranger-conf-dir . ; an edited file relaunches the controller alone."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from tarn import cli
from tarn.errors import ConfigError
from tarn.service import desired_service
from tarn.service.artifacts import RANGER_CONF_DIGEST_ENV
from tarn.spec import CONTROLLER, TRITON, Artifacts, build_service_spec, component_of, with_settings
from tarn.stdlib.config import TarnConfig, parse_config
from tests.support.ranger_documents import URL, write_xml

BASE = ["--model-repository", "hdfs:///models", "--runtime", "process", "--user", "tarn"]
ARTIFACTS = Artifacts(payload="hdfs:///a/tarn.pyz", launcher="hdfs:///a/tarn-launcher.pyz")


@pytest.fixture
def conf_dir(tmp_path: Path) -> Path:
    write_xml(tmp_path, URL)
    write_xml(tmp_path, {"xasecure.audit.is.enabled": "true"}, "ranger-triton-audit.xml")
    (tmp_path / "core-site.xml").write_text("<configuration/>")
    return tmp_path


def config(*extra: str) -> TarnConfig:
    return parse_config([*BASE, *extra], {})


def controller(spec: dict[str, object]) -> dict[str, object]:
    found = component_of(spec, CONTROLLER)
    assert found is not None
    return found


def test_the_files_are_uploaded_and_localized_into_the_controller(conf_dir: Path) -> None:
    desired = desired_service(config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir)), "tarn", {})
    base = "/user/tarn/.tarn/tarn"
    for name in ("ranger-triton-security.xml", "ranger-triton-audit.xml"):
        assert desired.uploads[f"{base}/{name}"] == (conf_dir / name).read_bytes()
    assert f"{base}/core-site.xml" not in desired.uploads
    component = controller(desired.spec)
    files = component["configuration"]["files"]  # type: ignore[index]
    assert {"type": "STATIC", "src_file": f"hdfs://{base}/ranger-triton-security.xml",
            "dest_file": "ranger-triton-security.xml"} in files  # fmt: skip
    args = shlex.split(str(component["launch_command"]))
    assert args[args.index("--ranger-conf-dir") + 1] == "."
    assert str(conf_dir) not in str(component["launch_command"])
    triton = component_of(desired.spec, TRITON)
    assert triton is not None
    assert "ranger" not in str(triton)
    assert RANGER_CONF_DIGEST_ENV in component["configuration"]["env"]  # type: ignore[index]


def test_an_edited_file_changes_the_controller_only(conf_dir: Path) -> None:
    source = config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir))
    before = desired_service(source, "tarn", {}).spec
    write_xml(conf_dir, {**URL, "ranger.plugin.triton.policy.pollIntervalMs": "5000"})
    after = desired_service(source, "tarn", {}).spec
    assert controller(before) != controller(after)
    assert component_of(before, TRITON) == component_of(after, TRITON)
    assert before["version"] != after["version"]


def test_notes_for_what_is_not_honoured(conf_dir: Path) -> None:
    write_xml(conf_dir, {**URL, "ranger.plugin.triton.service.name": "triton_dev"})
    desired = desired_service(config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir)), "tarn", {})
    assert any("overridden by --ranger-service 'triton_prod'" in note for note in desired.notes)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-rs", "triton_prod"], "--ranger-service: set, but no policy REST URL without --ranger-conf-dir"),
        (["-rs", "triton_prod", "--ranger-conf-dir", "/nonexistent/ranger"],
         "--ranger-conf-dir: no ranger-triton-security.xml in /nonexistent/ranger"),
    ],
)  # fmt: skip
def test_submit_fails_early_naming_the_flag(extra: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        desired_service(config(*extra), "tarn", {})
    assert str(raised.value).startswith(message)


def test_the_cli_says_it_before_contacting_anything(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["submit", "--dry-run", *BASE, "-rs", "triton_prod"], {}) == 2
    assert "tarn: error: --ranger-service: set, but no policy REST URL" in capsys.readouterr().err


def test_the_spec_and_the_artifacts_must_agree(conf_dir: Path) -> None:
    shipped = replace(ARTIFACTS, ranger_conf=("hdfs:///a/ranger-triton-security.xml",))
    with pytest.raises(ConfigError, match=r"^--ranger-conf-dir: the controller reads"):
        build_service_spec(config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir)), ARTIFACTS)
    with pytest.raises(ConfigError, match=r"^--ranger-conf-dir: the controller reads"):
        build_service_spec(config(), shipped)
    bad = replace(ARTIFACTS, ranger_conf=("/local/ranger-triton-security.xml",))
    with pytest.raises(ConfigError, match=r"^artifacts.ranger_conf\[0\]"):
        build_service_spec(config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir)), bad)


def test_new_bounds_keep_the_controller_on_the_localized_files(conf_dir: Path) -> None:
    desired = desired_service(config("-rs", "triton_prod", "--ranger-conf-dir", str(conf_dir)), "tarn", {})
    rebuilt = with_settings(desired.spec, replace(desired.config, max_instances=8))
    args = shlex.split(str(controller(rebuilt)["launch_command"]))
    assert args[args.index("--ranger-conf-dir") + 1] == "."
    assert args[args.index("--max-instances") + 1] == "8"
