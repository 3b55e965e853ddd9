"""Explain a snippet's mixed-precision behaviour: the ops it ran, GradScaler's decisions, fp16 hazards.

Runs in: the runner (imported ahead by the zygote, so a run never pays for it). Only torch and the
standard library are imported. The parts:

- `explainer`: the `Explainer` context manager, which installs the parts below and builds the report;
- `ops` (with `modes`, `calls`, `op_rows`, `reasons`): the op trace, each torch call's dtypes,
  shapes, snippet line and why; `unseen`: how the trace keeps out of the snippet's sight;
- `regions`: what a call ran inside (custom_fwd/custom_bwd, checkpoint's recomputation);
  `backward_rows`: rows for the snippet's code a backward pass runs; `compiled`: what a
  torch.compile graph computes, read from the graph;
- `cast_cache`: autocast's weight-cast cache, its reuses and stale or mismatched copies;
- `scaler` (with `scaler_errors`, `scaler_misuse`, `fused_step`, `grad_reads`, `iterations`):
  GradScaler events and misuse; `hazards`: float16 overflow, underflow, absorption;
- `summary`: the report's few plain sentences; `report`: the report's declared shape (TypedDicts).
"""

from sandbox.explain.explainer import MAX_REPORT_BYTES, Explainer, failed_report
from sandbox.explain.report import Report

__all__ = ["MAX_REPORT_BYTES", "Explainer", "Report", "failed_report"]
