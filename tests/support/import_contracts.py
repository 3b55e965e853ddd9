"""An import-linter contract type the built-in ones lack: an allow-list of outside packages.

`forbidden` can only deny packages by name, so a new dependency would slip past it. This contract
lists what a package may import from outside the project (the standard library always, plus the
packages named), and fails on anything else, naming the importing module and line.
"""

from __future__ import annotations

import sys

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AllowedExternalsContract(Contract):
    """Modules under `source_modules` import only the standard library and `allowed_external`."""

    type_name = "allowed_externals"

    source_modules = fields.ListField(subfield=fields.StringField())
    allowed_external = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        allowed = set(sys.stdlib_module_names) | set(self.allowed_external)  # type: ignore[arg-type]
        sources: set[str] = set()
        for root in self.source_modules:  # type: ignore[attr-defined]
            sources |= {root} | graph.find_descendants(root)
        own = {m.split(".")[0] for m in sources}
        bad = []
        for module in sorted(sources):
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                top = imported.split(".")[0]
                if top in own or top in allowed:
                    continue
                for detail in graph.get_import_details(importer=module, imported=imported) or [{}]:
                    bad.append((module, imported, detail.get("line_number", "?")))
        return ContractCheck(kept=not bad, warnings=None, metadata={"bad": bad})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, imported, line in check.metadata["bad"]:
            output.print_error(
                f"{module} (line {line}) imports {imported}, which is not allowed here"
            )
            output.new_line()
