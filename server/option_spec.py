"""How a server option is declared: `option(default, group, doc, **constraints)` gives a field of `Options`
(server/options.py) its `OptionSpec` as metadata; the section and groups the options are listed under."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

# The section name clients nest our settings under: {"waferline": {...}} in settings.json or init options.
SECTION = "waferline"

# The groups options are listed in, in this order: one table each in docs/configuration.md. The engine is built from
# the ENGINE group's options: changing any of them rebuilds it (option_parsing.ENGINE_OPTIONS).
COMPLETION, ENGINE, REPOSITORY = "completion", "engine", "repository"
GROUPS = (COMPLETION, ENGINE, REPOSITORY)

T = TypeVar("T")


@dataclass(frozen=True)
class OptionSpec:
    """What an option declares besides its type and default."""

    doc: str  # one line of markdown: what the option does (the constraints are appended where it is shown)
    group: str  # one of GROUPS
    minimum: float | None = None  # numbers: the smallest and largest value accepted, both included
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # strings: the values accepted, in the order they are listed
    choice_docs: Mapping[str, str] = dataclasses.field(default_factory=dict)  # choice -> what it means
    vscode: bool = True  # contributed as a VS Code setting (`waferline.<wire name>`)
    machine: bool = False  # VS Code: a user or machine setting only, never read from a workspace's settings


def option(default: T, group: str, doc: str, **constraints: Any) -> T:
    """A field of `Options` with its declaration (`OptionSpec(doc, group, **constraints)`) as metadata."""
    spec = OptionSpec(doc, group, **constraints)
    return dataclasses.field(default=default, metadata={"option": spec})
