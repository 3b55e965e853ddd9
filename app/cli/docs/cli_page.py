"""The command-line page, from the commands' own argparse parsers."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.docs.markdown import cell, code, header


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line on one line, whatever the terminal's width (which argparse reads)."""
    formatter = argparse.HelpFormatter(prog=parser.prog, width=10_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, short help, parser) of each subcommand, in the order they were registered."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), p) for name, p in action.choices.items()]
    return found


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=10_000)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        invocation = formatter._format_action_invocation(action)
        help_text = formatter._expand_help(action) if action.help else ""
        default = action.default
        shown = ""
        if default not in (None, False, argparse.SUPPRESS, [], "") and not isinstance(
            action, argparse._StoreTrueAction
        ):
            shown = code(str(default))
        kind = (
            "positional"
            if not action.option_strings
            else ("required" if action.required else "option")
        )
        if not action.option_strings and action.nargs in ("?", "*"):
            kind = "positional, optional"
        rows.append(f"| {code(invocation)} | {kind} | {shown} | {cell(help_text)} |")
    if not rows:
        return []
    return ["| Argument | Kind | Default | What it does |", "| --- | --- | --- | --- |", *rows, ""]


def _command_section(
    name: str, short: str, parser: argparse.ArgumentParser, module: Any, level: int
) -> list[str]:
    lines = [f"{'#' * level} {parser.prog}", ""]
    # The command module's docstring opens with what the command does, in more words than its
    # one-line help; a subcommand without a module of its own has the help only.
    doc = (
        (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        if module is not None
        else ""
    )
    if doc:
        lines += [doc, ""]
    elif short:
        lines += [short[0].upper() + short[1:] + ("" if short.endswith(".") else "."), ""]
    if parser.description:
        lines += [parser.description.strip(), ""]
    lines += ["```text", _usage(parser), "```", ""]
    lines += _arguments(parser)
    if parser.epilog:
        lines += ['??? note "More from `--help`"', "", "    ```text"]
        lines += [f"    {line}".rstrip() for line in parser.epilog.strip("\n").splitlines()]
        lines += ["    ```", ""]
    for sub_name, sub_short, sub_parser in _subcommands(parser):
        lines += _command_section(sub_name, sub_short, sub_parser, None, level + 1)
    return lines


def cli_page() -> str:
    from app.cli import COMMANDS, build_parser

    parser = build_parser()
    modules = {c.__name__.rsplit(".", 1)[1]: c for c in COMMANDS}
    commands = _subcommands(parser)
    lines = [
        header("the parsers of `app/cli/` (`COMMANDS` in `app/cli/__init__.py`)"),
        "# The command line",
        "",
        (
            "`ampquiz` is installed with the package (`make install` puts it in `.venv/bin/`); "
            "`python -m app.cli` is the same. Each command is one module in `app/cli/`; "
            "`ampquiz COMMAND --help` prints what this page shows for it."
        ),
        "",
        "| Command | What it does |",
        "| --- | --- |",
        *[f"| [`{name}`](#ampquiz-{name}) | {cell(short)} |" for name, short, _ in commands],
        "",
    ]
    for name, short, sub in commands:
        lines += _command_section(name, short, sub, modules.get(name.replace("-", "_")), 2)
    return "\n".join(lines).rstrip() + "\n"
