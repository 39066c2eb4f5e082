"""The run's report, built from the experiment directory alone."""

from .build import Report, build_report, build_report_from_dir
from .render import render_markdown, write_report

__all__ = ["Report", "build_report", "build_report_from_dir", "render_markdown", "write_report"]
