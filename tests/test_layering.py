"""Imports go down only: every import of every module, checked against one table of the edges the design allows.

The product is layered server -> engine -> hardware; training (the offline pipeline that builds the shipped model)
sits beside the server. The tools sit on top: waferline.cli (the `waferline` command and its subcommands) and
waferline.benchmarks (the `waferline bench*` subcommands), and a benchmark may use the cli's shared pieces, never
the other way round. Nothing below the tools imports them, and nothing the server runs imports training.

The walk reads each module's syntax tree, so it sees every `import` and `from ... import` wherever it stands: at the
top, inside a function (the lazy imports that keep `waferline --help` quick), and under `if TYPE_CHECKING:`.
Type-checking imports count like any other: an annotation naming a module of an upper layer is a dependency on it
even if it costs nothing at run time. What the walk cannot see is a module imported by a name in a string; only the
dispatcher (cli/main.py) does that, to load its subcommands. The second test checks the run-time side for the server.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The hardware layer's front door: the Device protocol, its value types and the backend registry; a backend's own
# modules (torch_backend, wafer) are behind it.
HARDWARE_INTERFACE = (
    "waferline.hardware",
    "waferline.hardware.device",
    "waferline.hardware.blocks",  # the GGUF block weights the engine hands to Device.place
    "waferline.hardware.registry",
)
# The engine's, for the server: the Engine protocol and its request types, the factory that builds one from the
# options (which alone knows the engine classes, and names the backends the options offer), and what to do with the
# heap a loaded engine leaves (engine/heap.py: the server's engine thread freezes it after each load).
ENGINE_INTERFACE = ("waferline.engine.api", "waferline.engine.factory", "waferline.engine.heap")
PRODUCT = (
    "waferline.server.*",
    "waferline.syntax.*",
    "waferline.engine.*",
    "waferline.hardware.*",
    "waferline.training.*",
)

# top-level folder -> what its modules may import of waferline besides their own package. "waferline.x.*" is the
# package x and every module in it; a name without ".*" is that module alone. docs/architecture.md draws this table
# (its "Layers" block, which test_the_architecture_doc_draws_this_table reads).
ALLOWED: dict[str, tuple[str, ...]] = {
    "hardware": (),
    "engine": HARDWARE_INTERFACE,
    # text, positions and tree-sitter: what a completion is made of, below the server and training alike
    "syntax": (),
    "server": (*ENGINE_INTERFACE, "waferline.syntax.*"),
    # the syntax layer's parsers choose fill-in-the-middle spans; the confidence model the server applies is fitted
    # here (training/calibrate.py)
    "training": ("waferline.engine.*", "waferline.hardware.*", "waferline.syntax.*"),
    "cli": PRODUCT,
    "benchmarks": (*PRODUCT, "waferline.cli.*"),
}
TOOLS_AND_TRAINING = ("waferline.cli", "waferline.benchmarks", "waferline.training")  # never loaded by the server


@dataclass(frozen=True)
class Violation:
    path: str  # relative to the repository root
    line: int
    statement: str  # the import statement, as written (normalised)
    imported: str  # the waferline module it imports

    def __str__(self) -> str:
        package = self.path.split("/")[0]
        allowed = ", ".join(ALLOWED[package]) or "nothing of waferline"
        return (
            f"{self.path}:{self.line}: `{self.statement}`: {package}/ may not import {self.imported} "
            f"(it may import: {allowed})"
        )


def module_name(path: str) -> str:
    """engine/model.py -> waferline.engine.model; server/repository/__init__.py -> waferline.server.repository."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["waferline", *parts])


def is_module(name: str) -> bool:
    """Whether waferline.x.y names a module or package of this repository (not an object defined in one)."""
    folder = ROOT.joinpath(*name.split(".")[1:])
    return folder.with_suffix(".py").is_file() or folder.is_dir()


def imported_modules(tree: ast.Module, path: str) -> list[tuple[ast.stmt, str]]:
    """(statement, module) for every waferline module an import statement in the tree loads, wherever it stands.

    Relative imports are resolved against `path`'s package; `from m import name` is the module m.name when that is
    a module of the repository, else m itself."""
    package = module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package.pop()
    found: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node, sub if alias.name != "*" and is_module(sub) else base))
    return [(node, module) for node, module in found if module.startswith("waferline.")]


def allows(rule: str, module: str) -> bool:
    if rule.endswith(".*"):
        return module == rule[:-2] or module.startswith(rule[:-1])
    return module == rule


def check_module(source: str, path: str) -> list[Violation]:
    """The imports of one module (its text, and its path from the repository root) that its package may not make."""
    package = path.split("/")[0]
    own = f"waferline.{package}"
    out = {
        Violation(path, node.lineno, ast.unparse(node), module)
        for node, module in imported_modules(ast.parse(source, filename=path), path)
        if not (module == own or module.startswith(own + "."))
        and not any(allows(rule, module) for rule in ALLOWED[package])
    }
    return sorted(out, key=lambda v: (v.line, v.imported))


def test_every_import_follows_the_layering() -> None:
    violations: list[Violation] = []
    for package in ALLOWED:
        files = sorted((ROOT / package).rglob("*.py"))
        assert files, f"no modules under {package}/: the table names a folder that is not there"
        for file in files:
            path = file.relative_to(ROOT).as_posix()
            violations += check_module(file.read_text(encoding="utf-8"), path)
    assert not violations, "imports that break the layering:\n" + "\n".join(map(str, violations))


def test_the_checker_names_file_line_and_import_of_a_bad_module() -> None:
    bad = """\
from __future__ import annotations

from typing import TYPE_CHECKING

from waferline.hardware import Device
from waferline.hardware.torch_backend import fused

if TYPE_CHECKING:
    from waferline.syntax.text import DocumentText


def tool():
    import waferline.cli.main
    from ..training import train
    from . import kvcache
"""
    found = check_module(bad, "engine/bad.py")
    assert [(v.line, v.imported) for v in found] == [
        (6, "waferline.hardware.torch_backend.fused"),  # a backend's internals, not the interface
        (9, "waferline.syntax.text"),  # upward, if only for a type
        (13, "waferline.cli.main"),  # a tool, inside a function
        (14, "waferline.training.train"),  # a relative import resolved to the training pipeline
    ]
    assert str(found[1]) == (
        "engine/bad.py:9: `from waferline.syntax.text import DocumentText`: engine/ may not import "
        "waferline.syntax.text (it may import: waferline.hardware, waferline.hardware.device, "
        "waferline.hardware.blocks, waferline.hardware.registry)"
    )
    assert check_module("from waferline.benchmarks.lsp import run\n", "cli/demo.py")[0].line == 1
    assert check_module("from waferline.engine.factory import build_engine\n", "server/app.py") == []
    assert check_module("from waferline.cli.typing_session import SCRIPT\n", "benchmarks/lsp.py") == []


def test_the_server_loads_no_tool_and_no_training_module() -> None:
    code = (
        "import sys\nimport waferline.server.app, waferline.server.handlers\n"
        f"top = {TOOLS_AND_TRAINING!r}\n"
        "print(' '.join(sorted(m for m in sys.modules if m in top or m.startswith(tuple(t + '.' for t in top)))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "", f"importing the server loaded: {done.stdout.split()}"


# The imports past the layers' front doors that the tree had before the table was drawn as the diagram (issue 28):
# each must be refused, wherever it would come back.
FORMER_SHORTCUTS = [
    ("server/worker.py", "from waferline.engine.jobs import Job, JobQueue"),
    ("server/document.py", "from waferline.engine.tokenizer import without_lone_surrogates"),
    ("server/engines.py", "from waferline.engine.routing import RoutedEngine"),
    ("server/engines.py", "from waferline.engine.fallback import FallbackEngine"),
    ("server/engines.py", "from waferline.engine.remote.engine import RemoteEngine"),
    ("server/engines.py", "from waferline.engine.remote.stream import RemoteError"),
    ("server/engines.py", "from waferline.engine.local import LocalEngine"),
    ("server/options.py", "from waferline.hardware.registry import AUTO, WEIGHT_FORMATS, backend_names"),
    ("training/fim.py", "from waferline.server.syntax.languages import parser_for"),
    ("training/calibrate.py", "from waferline.server.features.confidence import FEATURES, Calibration"),
    ("syntax/plan.py", "from waferline.engine.api import EditRequest"),
    ("engine/tokenizer.py", "from waferline.syntax.text import utf8_len"),
]


@pytest.mark.parametrize(("path", "statement"), FORMER_SHORTCUTS)
def test_each_former_shortcut_is_refused(path: str, statement: str) -> None:
    found = check_module(statement + "\n", path)
    assert [v.line for v in found] == [1], f"{path}: `{statement}` should break the layering"


def doc_table() -> dict[str, set[str]]:
    """docs/architecture.md's layer table (between `<!-- layers -->` and `<!-- /layers -->`) as rules like ALLOWED's:
    `engine/` is waferline.engine.*, `engine/api.py` waferline.engine.api, `hardware/__init__.py` waferline.hardware."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    table: dict[str, set[str]] = {}
    for line in block.strip().splitlines()[2:]:
        folder, may = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rules = set()
        for cited in re.findall(r"`([^`]+)`", may):
            name = "waferline." + cited.removesuffix("/__init__.py").removesuffix(".py").rstrip("/").replace("/", ".")
            rules.add(name + ".*" if cited.endswith("/") and not cited.endswith("__init__.py") else name)
        table[folder.strip("`").rstrip("/")] = rules
    return table


def test_the_architecture_doc_draws_this_table() -> None:
    assert doc_table() == {package: set(rules) for package, rules in ALLOWED.items()}
