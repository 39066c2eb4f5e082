"""The run's report, built from the experiment directory alone.

Its names load on first use: `report.pytest_html`, which every xdist worker imports, must not pull
in scipy (~2 s) through the builder.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .build import Report, build_report, build_report_from_dir
    from .render import render_markdown
    from .write import write_report

_HOME = {"Report": "build", "build_report": "build", "build_report_from_dir": "build",
         "render_markdown": "render", "write_report": "write"}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
