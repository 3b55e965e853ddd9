"""The GradScaler mistakes: scaling, unscaling, stepping and updating done wrong. One class a
mistake; `app.mutate.rules` lists them."""

from __future__ import annotations

import ast
from typing import ClassVar

from app.mutate.rule import (
    Rule,
    Scalers,
    contains,
    dotted,
    is_autocast,
    is_backward_call,
    is_clip_call,
    is_grad_scaler,
    keyword,
    position,
    remove_statements,
    statement_lists,
)

LOOPS = (ast.For, ast.AsyncFor, ast.While)


class DropScale(Rule):
    name = "drop-scale"
    title = "call `backward()` on the loss without `scaler.scale()`"
    explanation = (
        "Without `scaler.scale(loss)` the gradients are not multiplied by the scale, but "
        "`scaler.step()` still divides them by it: if the scaler has a scale from an earlier "
        "iteration the update is silently 65536× too small; if it never had one, `step()` raises "
        "`AssertionError: ... _scale is None`."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)
        changed = False
        place = self.place

        class Unwrap(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                if (
                    scalers.method_call(node, "scale")
                    and len(node.args) == 1
                    and not node.keywords
                    and place(node)
                ):
                    changed = True
                    return node.args[0]
                return node

        Unwrap().visit(tree)
        return changed


class DropUpdate(Rule):
    name = "drop-update"
    title = "forget `scaler.update()`"
    explanation = (
        "`update()` is what adjusts the scale: without it the scale never backs off after an "
        "overflow (every later step is skipped too) and never grows. Calling `step()` twice "
        "without an `update()` between raises."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)
        return remove_statements(tree, lambda s: scalers.statement(s, "update") and self.place(s))


class UpdateInInnerLoop(Rule):
    name = "update-in-inner-loop"
    title = "call `scaler.update()` inside the inner (micro-batch) loop"
    explanation = (
        "With gradient accumulation, `update()` belongs once per optimizer step, after "
        "`scaler.step()`. Calling it per micro-batch, before any `step()`, raises "
        "`No inf checks were recorded prior to update`; and it would change the scale while "
        "gradients scaled by the old one are still accumulating."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)
        changed = False
        for body in list(statement_lists(tree)):
            for update in [s for s in body if scalers.statement(s, "update")]:
                before = body[: body.index(update)]
                loop = next(
                    (
                        s
                        for s in reversed(before)
                        if isinstance(s, LOOPS) and contains(s, is_backward_call)
                    ),
                    None,
                )
                if loop is None:
                    continue
                inner, backward = max(
                    ((lst, s) for lst in statement_lists(loop) for s in lst
                     if isinstance(s, ast.Expr) and is_backward_call(s.value)),
                    key=lambda pair: position(pair[1]),
                    default=(None, None),
                )  # fmt: skip
                if inner is None or backward is None or not self.place(update):
                    continue
                body.remove(update)
                inner.insert(inner.index(backward) + 1, update)
                changed = True
        return changed


class ClipBeforeUnscale(Rule):
    name = "clip-before-unscale"
    title = "clip the gradients before `scaler.unscale_()`"
    explanation = (
        "Gradients are still multiplied by the scale (65536 at first) until `unscale_()`, so a "
        "clip before it measures the scaled norm and clips far too hard (or, with "
        "`clip_grad_value_`, compares scaled values against the threshold)."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)

        def unscales(node: ast.AST) -> bool:
            return scalers.method_call(node, "unscale_")

        changed = False
        for body in list(statement_lists(tree)):
            for stmt in [
                s for s in body if contains(s, unscales) and not contains(s, is_clip_call)
            ]:
                i = body.index(stmt)
                clip = next(
                    (
                        s
                        for s in body[i + 1 :]
                        if contains(s, is_clip_call) and not contains(s, unscales)
                    ),
                    None,
                )
                if clip is None or not self.place(stmt):
                    continue
                body.remove(stmt)
                body.insert(body.index(clip) + 1, stmt)
                changed = True
        return changed


class DropUnscale(Rule):
    name = "drop-unscale"
    title = "leave out `scaler.unscale_()`"
    explanation = (
        "Without `unscale_()` the gradients stay multiplied by the scale until `scaler.step()` "
        "unscales them itself: the optimizer still sees the right gradients, but anything that "
        "reads them in between (clipping, logging a norm) sees values 65536× too large."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)
        return remove_statements(tree, lambda s: scalers.statement(s, "unscale_") and self.place(s))


class SwapScalerDevice(Rule):
    name = "swap-scaler-device"
    title = 'build the GradScaler for the other device (`"cpu"` ↔ `"cuda"`)'
    explanation = (
        '`torch.amp.GradScaler()` defaults to `"cuda"`, whatever device the model is on. On a '
        "host without CUDA a CUDA scaler warns and disables itself: `scale()` returns the loss "
        "unchanged, `step()` is a plain `optimizer.step()` and the scale reads 1.0."
    )
    SWAP: ClassVar[dict[str, str]] = {"cpu": "cuda", "cuda": "cpu"}

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_grad_scaler(n)]:
            assert isinstance(call, ast.Call)
            name = dotted(call.func) or ""
            if ".cuda." in f".{name}" or ".cpu." in f".{name}":
                continue  # torch.cuda.amp.GradScaler: its first argument is init_scale
            device = call.args[0] if call.args else keyword(call, "device")
            if isinstance(device, ast.Constant) and device.value in self.SWAP and self.place(call):
                swapped = ast.Constant(self.SWAP[device.value])
                if call.args:
                    call.args[0] = swapped
                else:
                    call.keywords = [
                        ast.keyword("device", swapped) if k.arg == "device" else k
                        for k in call.keywords
                    ]
                changed = True
            # The "cuda" default, made explicit.
            elif device is None and name.endswith("amp.GradScaler") and self.place(call):
                call.args.insert(0, ast.Constant("cpu"))
                changed = True
        return changed


class DropEnabledFlag(Rule):
    name = "drop-enabled-flag"
    title = "leave out the `enabled=` flag of the GradScaler or `autocast`"
    explanation = (
        "`enabled=use_amp` is how one script runs both with mixed precision and without it (the "
        "float32 baseline). Forget it on the scaler or on `autocast` and that half is on "
        "whatever the flag says: the baseline quietly runs in low precision, or scales its loss, "
        "and stops being a baseline."
    )

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_grad_scaler(n) or is_autocast(n)]:
            assert isinstance(call, ast.Call)
            enabled = keyword(call, "enabled")
            if (
                enabled is None
                or (isinstance(enabled, ast.Constant) and enabled.value is True)
                or not self.place(call)
            ):
                continue
            call.keywords = [k for k in call.keywords if k.arg != "enabled"]
            changed = True
        return changed


class DeprecatedCudaScaler(Rule):
    name = "deprecated-cuda-scaler"
    title = "build the scaler with the old spelling, `torch.cuda.amp.GradScaler()`"
    explanation = (
        "Older tutorials (and code written before torch 2.3) spell it `torch.cuda.amp.GradScaler()`: "
        "deprecated now (a `FutureWarning`), and a CUDA scaler whatever device the model is on; "
        "on a host without CUDA it warns and disables itself, so `scale()` returns the loss "
        "unchanged and the scale reads 1.0."
    )
    DEVICE_FIRST: ClassVar[tuple[str, ...]] = ("device", "init_scale", "growth_factor", "backoff_factor",
                                               "growth_interval", "enabled")  # fmt: skip

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_grad_scaler(n)]:
            assert isinstance(call, ast.Call)
            if dotted(call.func) not in (
                "torch.amp.GradScaler",
                "torch.GradScaler",
            ) or not self.place(call):
                continue
            named = [ast.keyword(n, a) for n, a in zip(self.DEVICE_FIRST, call.args, strict=False)]
            call.func = ast.Attribute(ast.Attribute(ast.Attribute(ast.Name("torch", ast.Load()), "cuda", ast.Load()),
                                                    "amp", ast.Load()), "GradScaler", ast.Load())  # fmt: skip
            call.args = []
            call.keywords = [k for k in named + call.keywords if k.arg != "device"]
            changed = True
        return changed


class OptimizerStep(Rule):
    name = "optimizer-step"
    title = "call `optimizer.step()` instead of `scaler.step(optimizer)`"
    explanation = (
        "`optimizer.step()` applies the gradients as they are: still multiplied by the scale "
        "(unless `unscale_()` ran), and without the inf/NaN check, so an overflowed step is "
        "applied instead of skipped and `update()` finds no inf checks."
    )

    def edit(self, tree: ast.Module) -> bool:
        scalers = Scalers(tree)
        changed = False
        place = self.place

        class Replace(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                if (
                    scalers.method_call(node, "step")
                    and len(node.args) == 1
                    and not node.keywords
                    and place(node)
                ):
                    changed = True
                    return ast.Call(ast.Attribute(node.args[0], "step", ast.Load()), [], [])
                return node

        Replace().visit(tree)
        return changed


class ScalerDisabled(Rule):
    name = "scaler-disabled"
    title = "build the scaler with `GradScaler(enabled=False)`"
    explanation = (
        "A disabled scaler is a pass-through: `scale()` returns the loss unchanged, `step()` is "
        "a plain `optimizer.step()` and the scale reads 1.0. With bfloat16 that is fine; with "
        "float16, small gradients underflow to zero."
    )

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_grad_scaler(n)]:
            assert isinstance(call, ast.Call)
            enabled = keyword(call, "enabled")
            if (isinstance(enabled, ast.Constant) and enabled.value is False) or not self.place(
                call
            ):
                continue
            call.keywords = [k for k in call.keywords if k.arg != "enabled"] + [
                ast.keyword("enabled", ast.Constant(False))
            ]
            changed = True
        return changed
