"""docs/operations.md names only management commands that exist, with flags they take:
every `manage.py …` line is parsed by the command's own parser, and the command table's
flags are checked against it. A renamed command or flag fails here, not in an outage."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class
from django.core.management.base import CommandParser

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text()
SHELL_BREAKS = {"|", "||", "&&", ";", ">", ">>", "2>&1"}


def _invocations() -> list[list[str]]:
    found = []
    for match in re.finditer(r"manage\.py\s+([^`\n]+)", DOC):
        tokens = shlex.split(match.group(1), comments=True)
        for i, token in enumerate(tokens):
            if token in SHELL_BREAKS:
                tokens = tokens[:i]
                break
        found.append(tokens)
    return found


def _table_commands() -> list[str]:
    section = DOC.split("## All the management commands", 1)[1]
    spans = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = re.split(r"(?<!\\)\|", line)[1]
            spans += re.findall(r"`([^`]+)`", first_cell)
    return spans


def _parser(name: str) -> CommandParser:
    commands = get_commands()
    assert name in commands, f"docs/operations.md names `manage.py {name}`, which does not exist"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    parser.allow_abbrev = False  # `--ten` for `--tenant` would parse, and then rot
    return parser


INVOCATIONS = _invocations()
TABLE = _table_commands()


def test_the_guide_shows_commands():
    assert len(INVOCATIONS) >= 20
    assert len(TABLE) >= 15


@pytest.mark.parametrize("tokens", INVOCATIONS, ids=lambda t: " ".join(t))
def test_every_command_shown_exists_and_its_arguments_parse(tokens):
    _parser(tokens[0]).parse_args(tokens[1:])


@pytest.mark.parametrize("span", TABLE)
def test_every_command_in_the_table_exists_with_its_flags(span):
    name, *rest = span.replace("\\|", "|").split()
    parser = _parser(name)
    flags = [t.strip("[]") for t in rest if t.lstrip("[").startswith("--")]
    for flag in flags:
        assert flag in parser._option_string_actions, f"`{name}` has no {flag}"  # noqa: SLF001


def test_every_make_target_named_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"`make (\w[\w-]*)`", DOC))
    assert targets
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"no `make {target}`"
