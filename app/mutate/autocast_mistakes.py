"""The autocast mistakes: the region, its dtype and device, and casts done wrong. One class a
mistake; `app.mutate.rules` lists them."""

from __future__ import annotations

import ast
from typing import ClassVar

from app.mutate.rule import (
    Rule,
    autocast_device,
    contains,
    is_autocast,
    is_backward_call,
    keyword,
    statement_lists,
    torch_attr,
)

LOOPS = (ast.For, ast.AsyncFor, ast.While)


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
                if (
                    isinstance(stmt, ast.With | ast.AsyncWith)
                    and any(is_autocast(w.context_expr) for w in stmt.items)
                    and self.place(stmt)
                ):
                    changed = True
                    stmt.items = [w for w in stmt.items if not is_autocast(w.context_expr)]
                    if not stmt.items:
                        body[i : i + 1] = stmt.body
                        continue  # the spliced body may hold another autocast block
                i += 1
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and any(map(is_autocast, node.decorator_list))
                and self.place(node)
            ):
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
    SWAP: ClassVar[dict[str, str]] = {
        "float16": "bfloat16",
        "half": "bfloat16",
        "bfloat16": "float16",
    }
    DEFAULT: ClassVar[dict[str, str]] = {"cpu": "bfloat16", "cuda": "float16"}

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_autocast(n)]:
            assert isinstance(call, ast.Call)
            positional = len(call.args) > 1
            dtype = call.args[1] if positional else keyword(call, "dtype")
            known = isinstance(dtype, ast.Attribute) and dtype.attr in self.SWAP
            if not (
                known or (dtype is None and autocast_device(call) in self.DEFAULT)
            ) or not self.place(call):
                continue
            if dtype is None:
                device = autocast_device(call)
                assert device is not None
                call.keywords.append(
                    ast.keyword("dtype", torch_attr(self.SWAP[self.DEFAULT[device]]))
                )
                changed = True
            elif isinstance(dtype, ast.Attribute) and dtype.attr in self.SWAP:
                swapped = torch_attr(self.SWAP[dtype.attr], dtype)
                if positional:
                    call.args[1] = swapped
                else:
                    call.keywords = [
                        ast.keyword("dtype", swapped) if k.arg == "dtype" else k
                        for k in call.keywords
                    ]
                changed = True
        return changed


class SwapAutocastDevice(Rule):
    name = "swap-autocast-device"
    title = 'give autocast the other device (`"cpu"` ↔ `"cuda"`)'
    explanation = (
        "Autocast only changes ops on tensors of its own device: a CUDA region leaves CPU "
        'tensors in float32, and on a host without a GPU `autocast("cuda")` warns and disables '
        'itself. Code that "uses autocast" may be running nothing in lower precision.'
    )
    SWAP: ClassVar[dict[str, str]] = {"cpu": "cuda", "cuda": "cpu"}

    def edit(self, tree: ast.Module) -> bool:
        changed = False
        for call in [n for n in ast.walk(tree) if is_autocast(n)]:
            assert isinstance(call, ast.Call)
            literal = [call.args[0]] if call.args else []
            literal += [k.value for k in call.keywords if k.arg == "device_type"]
            if not any(
                isinstance(a, ast.Constant) and a.value in self.SWAP for a in literal
            ) or not self.place(call):
                continue
            if (
                call.args
                and isinstance(call.args[0], ast.Constant)
                and call.args[0].value in self.SWAP
            ):
                call.args[0] = ast.Constant(self.SWAP[call.args[0].value])
                changed = True
            for k in call.keywords:
                if (
                    k.arg == "device_type"
                    and isinstance(k.value, ast.Constant)
                    and k.value.value in self.SWAP
                ):
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
                if isinstance(stmt, ast.With) and any(
                    is_autocast(w.context_expr) for w in stmt.items
                ):
                    rest = body[i + 1 :]
                    j = next((k for k, s in enumerate(rest) if contains(s, is_backward_call)), None)
                    # only a plain statement, and no other autocast region on the way
                    if (
                        j is not None
                        and not isinstance(rest[j], (ast.With, ast.If, *LOOPS))
                        and not any(contains(s, is_autocast) for s in rest[: j + 1])
                        and self.place(stmt)
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
        place = self.place

        class Unwrap(ast.NodeTransformer):
            def visit_Call(self, node: ast.Call) -> ast.AST:
                nonlocal changed
                self.generic_visit(node)
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and func.attr == "float"
                    and not node.args
                    and not node.keywords
                    and place(node)
                ):
                    changed = True
                    return func.value
                return node

        Unwrap().visit(tree)
        return changed
