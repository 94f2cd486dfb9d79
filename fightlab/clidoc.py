"""The command-line reference, docs/cli.md, generated from the parser `python -m fightlab` uses,
so the page and ``--help`` come from one source and cannot drift apart.

    .venv/bin/python -m fightlab.clidoc > docs/cli.md

`markdown()` walks `fightlab.cli`'s argparse parser: every command (and sub-action, e.g.
``survey launch``), its description, its usage and a table of its arguments with their help text
(defaults as ``--help`` shows them). The text does not depend on the terminal: usage lines are
wrapped at :data:`WIDTH` columns.
"""

from __future__ import annotations

import argparse
import os
from unittest import mock

#: the column width usage lines are wrapped at, whatever the terminal
WIDTH = 100

HEADER = """# Command-line reference

Generated from the parser of `python -m fightlab` (`fightlab/cliparser.py`) by `fightlab/clidoc.py`; do
not edit by hand. Regenerate with `.venv/bin/python -m fightlab.clidoc > docs/cli.md` (a test
fails when this page and the parser differ). What the commands do and how they behave together
(batches, sweeps, run folders, resume, publishing, graphs): [cli-guide.md](cli-guide.md).
Every command is run as `.venv/bin/python -m fightlab COMMAND ...`.
"""


def _cell(text: str) -> str:
    """One markdown table cell: newlines folded, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command of ``parser``, in the order defined."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            first = {id(sub): name for name, sub in reversed(action.choices.items())}  # aliases: one parser
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()
                    if first[id(sub)] == name]
    return out


def _arguments(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(invocation, help) of each argument ``--help`` lists, help and sub-command actions left
    out; help text expanded as the parser's formatter expands it (its defaults included)."""
    fmt = parser._get_formatter()
    return [(fmt._format_action_invocation(a), fmt._expand_help(a) if a.help else "")
            for a in parser._actions if a.help != argparse.SUPPRESS
            and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def _section(path: list[str], summary: str, parser: argparse.ArgumentParser) -> list[str]:
    """The markdown of one command (heading, description, usage, arguments), then its
    sub-commands' sections."""
    lines = [f"## {' '.join(path)}", ""]
    text = parser.description or summary
    if text:
        lines += [" ".join(text.split()), ""]
    lines += ["```", parser.format_usage().strip(), "```", ""]
    args = _arguments(parser)
    if args:
        lines += ["| argument | help |", "| --- | --- |"]
        lines += [f"| `{_cell(inv)}` | {_cell(text)} |" for inv, text in args]
        lines.append("")
    for name, sub_help, sub in _subcommands(parser):
        lines += _section(path + [name], sub_help, sub)
    return lines


def markdown() -> str:
    """docs/cli.md: :data:`HEADER`, a list of the commands, then one section per command and
    sub-command, from `fightlab.cli`'s parser. Deterministic: usage is wrapped at :data:`WIDTH`
    columns whatever ``COLUMNS`` or the terminal say."""
    from fightlab.cli import _parser

    with mock.patch.dict(os.environ, {"COLUMNS": str(WIDTH + 2)}):
        parser = _parser()
        commands = _subcommands(parser)
        lines = [HEADER, "| command | what it does |", "| --- | --- |"]
        lines += [f"| [`{name}`](#{name}) | {_cell(h)} |" for name, h, _ in commands]
        lines.append("")
        for name, h, sub in commands:
            lines += _section([name], h, sub)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(markdown())
