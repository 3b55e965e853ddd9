"""Explain a snippet's mixed-precision behaviour: the ops it ran, GradScaler's decisions, fp16 hazards.

Runs in: the runner (imported ahead by the zygote, so a run never pays for it). Only torch and the
standard library are imported. The parts:

- `explainer`: the `Explainer` context manager, which installs the three below and builds the report;
- `ops` (with `calls`): the op trace, each torch call's dtypes, shapes, snippet line and why;
  `unseen`: how the trace keeps out of the snippet's sight (its output, warnings and modes);
- `scaler`: GradScaler events and misuse; `hazards`: float16 overflow, underflow, absorption;
- `summary`: the report's few plain sentences; `report`: the report's declared shape (TypedDicts).
"""

from sandbox.explain.explainer import MAX_REPORT_BYTES, Explainer, failed_report
from sandbox.explain.report import Report

__all__ = ["MAX_REPORT_BYTES", "Explainer", "Report", "failed_report"]
