"""The rules: each classic AMP mistake as one small class, listed in `RULES`.

Every rule changes every place its pattern appears (a mistake made once is usually made
throughout). Adding a rule is one class here with `name`, `title`, `explanation` and `edit`, and
one entry in `RULES`; a rule's `name` keys its recorded runs, so renaming one drops its records.
"""

from __future__ import annotations

import ast
from typing import ClassVar

from app.mutate.rule import (
    Rule,
    Scalers,
    autocast_device,
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
    torch_attr,
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

        class Unwrap(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                if scalers.method_call(node, "scale") and len(node.args) == 1 and not node.keywords:
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
        return remove_statements(tree, lambda s: scalers.statement(s, "update"))


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
                loop = next((s for s in reversed(before) if isinstance(s, LOOPS) and contains(s, is_backward_call)), None)
                if loop is None:
                    continue
                inner, backward = max(
                    ((lst, s) for lst in statement_lists(loop) for s in lst
                     if isinstance(s, ast.Expr) and is_backward_call(s.value)),
                    key=lambda pair: position(pair[1]),
                    default=(None, None),
                )  # fmt: skip
                if inner is None:
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
            for stmt in [s for s in body if contains(s, unscales) and not contains(s, is_clip_call)]:
                i = body.index(stmt)
                clip = next((s for s in body[i + 1:] if contains(s, is_clip_call) and not contains(s, unscales)), None)
                if clip is None:
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
        return remove_statements(tree, lambda s: scalers.statement(s, "unscale_"))


class SwapScalerDevice(Rule):
    name = "swap-scaler-device"
    title = "build the GradScaler for the other device (`\"cpu\"` ↔ `\"cuda\"`)"
    explanation = (
        "`torch.amp.GradScaler()` defaults to `\"cuda\"`, whatever device the model is on. On a "
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
            if isinstance(device, ast.Constant) and device.value in self.SWAP:
                swapped = ast.Constant(self.SWAP[device.value])
                if call.args:
                    call.args[0] = swapped
                else:
                    call.keywords = [ast.keyword("device", swapped) if k.arg == "device" else k for k in call.keywords]
                changed = True
            elif device is None and name.endswith("amp.GradScaler"):  # the "cuda" default, made explicit
                call.args.insert(0, ast.Constant("cpu"))
                changed = True
        return changed


class DropAutocast(Rule):
    name = "drop-autocast"
    title = "leave out the `autocast` context (keeping its body)"
    explanation = (
        "Outside autocast every op runs in its inputs' dtype: a float32 model stays float32 "
        "end to end (nothing is cast to float16 or bfloat16), which is correct but uses none of "
        "mixed precision's speed or memory savings."
    )

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for body in list(statement_lists(tree)):
            i = 0
            while i < len(body):
                stmt = body[i]
                if isinstance(stmt, ast.With | ast.AsyncWith) and any(is_autocast(w.context_expr) for w in stmt.items):
                    changed = True
                    stmt.items = [w for w in stmt.items if not is_autocast(w.context_expr)]
                    if not stmt.items:
                        body[i : i + 1] = stmt.body
                        continue  # the spliced body may hold another autocast block
                i += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(map(is_autocast, node.decorator_list)):
                node.decorator_list = [d for d in node.decorator_list if not is_autocast(d)]
                changed = True
        return changed


class SwapAutocastDtype(Rule):
    name = "swap-autocast-dtype"
    title = "switch autocast's dtype between `float16` and `bfloat16`"
    explanation = (
        "float16 has 10 mantissa bits but overflows above 65504; bfloat16 keeps float32's range "
        "with only 7 mantissa bits. Autocast's default is bfloat16 on the CPU and float16 on "
        "CUDA, so leaving the dtype out is not the same everywhere."
    )
    SWAP: ClassVar[dict[str, str]] = {"float16": "bfloat16", "half": "bfloat16", "bfloat16": "float16"}
    DEFAULT: ClassVar[dict[str, str]] = {"cpu": "bfloat16", "cuda": "float16"}

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_autocast(n)]:
            assert isinstance(call, ast.Call)
            positional = len(call.args) > 1
            dtype = call.args[1] if positional else keyword(call, "dtype")
            if dtype is None:
                device = autocast_device(call)
                if device not in self.DEFAULT:
                    continue
                call.keywords.append(ast.keyword("dtype", torch_attr(self.SWAP[self.DEFAULT[device]])))
                changed = True
            elif isinstance(dtype, ast.Attribute) and dtype.attr in self.SWAP:
                swapped = torch_attr(self.SWAP[dtype.attr], dtype)
                if positional:
                    call.args[1] = swapped
                else:
                    call.keywords = [ast.keyword("dtype", swapped) if k.arg == "dtype" else k for k in call.keywords]
                changed = True
        return changed


class SwapAutocastDevice(Rule):
    name = "swap-autocast-device"
    title = "give autocast the other device (`\"cpu\"` ↔ `\"cuda\"`)"
    explanation = (
        "Autocast only changes ops on tensors of its own device: a CUDA region leaves CPU "
        "tensors in float32, and on a host without a GPU `autocast(\"cuda\")` warns and disables "
        "itself. Code that \"uses autocast\" may be running nothing in lower precision."
    )
    SWAP: ClassVar[dict[str, str]] = {"cpu": "cuda", "cuda": "cpu"}

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_autocast(n)]:
            assert isinstance(call, ast.Call)
            if call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value in self.SWAP:
                call.args[0] = ast.Constant(self.SWAP[call.args[0].value])
                changed = True
            for k in call.keywords:
                if k.arg == "device_type" and isinstance(k.value, ast.Constant) and k.value.value in self.SWAP:
                    k.value = ast.Constant(self.SWAP[k.value.value])
                    changed = True
        return changed


class BackwardInsideAutocast(Rule):
    name = "backward-inside-autocast"
    title = "run `backward()` inside the `autocast` region"
    explanation = (
        "The docs recommend autocast around the forward pass and the loss only. Backward ops "
        "run in the dtype their forward ops chose either way, so moving `backward()` inside "
        "usually changes nothing you can see, which is why the mistake survives code review."
    )

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for body in list(statement_lists(tree)):
            i = 0
            while i < len(body):
                stmt = body[i]
                if isinstance(stmt, ast.With) and any(is_autocast(w.context_expr) for w in stmt.items):
                    rest = body[i + 1:]
                    j = next((k for k, s in enumerate(rest) if contains(s, is_backward_call)), None)
                    # only a plain statement, and no other autocast region on the way
                    if j is not None and not isinstance(rest[j], (ast.With, ast.If, *LOOPS)) and not any(
                        contains(s, is_autocast) for s in rest[: j + 1]
                    ):
                        stmt.body.extend(rest[: j + 1])
                        del body[i + 1 : i + 2 + j]
                        changed = True
                i += 1
        return changed


class DropFloatCasts(Rule):
    name = "drop-float-casts"
    title = "leave out the `.float()` casts"
    explanation = (
        "Autocast's outputs stay float16 or bfloat16 after the region. Without `.float()`, a "
        "loss or a reduction computed from them runs in low precision, and mixing them with "
        "float32 tensors outside autocast can raise a dtype mismatch."
    )

    def edit(self, tree: ast.Module) -> bool:
        changed = False

        class Unwrap(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr == "float" and not node.args and not node.keywords:
                    changed = True
                    return func.value
                return node

        Unwrap().visit(tree)
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

        class Replace(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                if scalers.method_call(node, "step") and len(node.args) == 1 and not node.keywords:
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
            if isinstance(enabled, ast.Constant) and enabled.value is False:
                continue
            call.keywords = [k for k in call.keywords if k.arg != "enabled"] + [ast.keyword("enabled", ast.Constant(False))]
            changed = True
        return changed


RULES: tuple[Rule, ...] = (
    DropScale(),
    DropUpdate(),
    UpdateInInnerLoop(),
    ClipBeforeUnscale(),
    DropUnscale(),
    OptimizerStep(),
    ScalerDisabled(),
    SwapScalerDevice(),
    DropAutocast(),
    SwapAutocastDtype(),
    SwapAutocastDevice(),
    BackwardInsideAutocast(),
    DropFloatCasts(),
)
"""Every rule, in the order their mutants are listed."""


def rule(name: str) -> Rule | None:
    return next((r for r in RULES if r.name == name), None)
