"""The notebooks' scripts, loaded from their files: the tests execute and serve the notebooks with their code.

``notebooks/execute.py`` (what ``python notebooks/execute.py`` does) and
``notebooks/voila_page.py`` (the panel as a web page, which
``notebooks/screenshot.py`` uses too) stay scripts beside the notebooks;
their names are not put on the import path of the whole suite.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from support import ROOT


def script(name: str) -> ModuleType:
    """``notebooks/<name>.py`` as the module ``notebooks_<name>``."""
    spec = importlib.util.spec_from_file_location(f"notebooks_{name}", ROOT / "notebooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


execute = script("execute")
voila_page = script("voila_page")
