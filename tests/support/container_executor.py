"""The lab's stand-in for Hadoop's container-executor (lab/container_executor/container_executor.py),
loaded as a module: its pure decisions are the reference TARN's own checks are held to."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support import ROOT

SCRIPT = ROOT / "lab" / "container_executor" / "container_executor.py"
NAME = "lab_container_executor"


def stand_in() -> ModuleType:
    """The stand-in's module (loaded once; its dataclasses look their module up in sys.modules)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    spec = importlib.util.spec_from_file_location(NAME, SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[NAME] = module
    spec.loader.exec_module(module)
    return module
