"""`ampquiz export [PATH] --format moodle|gift|qti|json [-o FILE]`: the bank for an LMS.

Text formats (Moodle XML, GIFT, JSON) go to stdout unless `-o` names a file; QTI is a zip content
package and needs `-o`. The formats themselves live in `app.export`. A question a format cannot
carry (a character XML 1.0 has not, say) is left out and said on stderr at its `file:line`; the
rest are exported, and the command then ends with status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.common import DEFAULT_BANK, load_clean_bank


def _cmd_export(args: argparse.Namespace) -> int:
    from app.export import FORMATS
    from app.verify.proof_lines import without_contradicted_keys

    fmt = FORMATS[args.format]
    if fmt.binary and args.output is None:
        print(f"ampquiz export: --format {fmt.name} writes a {fmt.description} (a zip): "
              f"name the file with -o, e.g. -o bank{fmt.suffix}", file=sys.stderr)  # fmt: skip
        return 2
    bank = load_clean_bank(args.path)
    if bank is None:
        return 1
    bank, left_out = without_contradicted_keys(bank)
    for line in left_out:
        print(
            f"left out, as the server holds its key back (fix it; for a record, then `ampquiz verify --record`): {line}",
            file=sys.stderr,
        )
    exported = fmt.write(bank, None)
    for problem in exported.refused:
        print(problem, file=sys.stderr)
    data = exported.data
    if args.output is None:
        assert isinstance(data, str)
        sys.stdout.flush()
        sys.stdout.buffer.write(data.encode("utf-8"))  # the formats are UTF-8, whatever the locale
        sys.stdout.buffer.flush()
    elif isinstance(data, str):
        args.output.write_text(data, encoding="utf-8")
    else:
        args.output.write_bytes(data)
    refused = {(p.path, p.line, p.col) for p in exported.refused}
    kept = [q for q in bank.questions if (q.path, q.line, q.col) not in refused]
    if args.output is not None:
        print(f"wrote {len(kept)} questions in {len({q.set_id for q in kept})} sets to {args.output} "
              f"({fmt.description})", file=sys.stderr)  # fmt: skip
    if exported.refused:
        n = len(exported.refused)
        print(f"ampquiz export: {n} question{'s' if n != 1 else ''} left out, which {fmt.description} cannot "
              "carry as written: fix each where said above", file=sys.stderr)  # fmt: skip
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export the bank: Moodle XML, GIFT, QTI 2.1 (zip) or JSON")
    p.add_argument("path", nargs="?", default=DEFAULT_BANK, type=Path)
    p.add_argument("--format", choices=["moodle", "gift", "qti", "json"], default="json",
                   help="moodle: Moodle XML; gift: GIFT text; qti: a QTI 2.1 content package (zip, needs -o); "
                        "json: the normalised bank (default)")  # fmt: skip
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="write to this file (default: stdout, for the text formats)")  # fmt: skip
    p.set_defaults(func=_cmd_export)
