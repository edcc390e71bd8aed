"""Which files of a workspace folder get indexed, and reading them safely.

The files are those git would track: `git ls-files --cached --others --exclude-standard` when the folder is in a git
work tree (run with fsmonitor disabled, so that git starts no program named by the repository's configuration), or
else a walk of the folder that honours every `.gitignore` on the way (through the `pathspec` library). Then a file is
skipped when it has no language we index, matches an exclusion, is a symlink whose target leaves the folder, is not a
regular file, is larger than the size limit or looks binary (a NUL byte near its start).

Nothing outside the folder is ever read: every path is resolved (following symlinks) and must stay inside the
resolved folder before it is opened, and the resolved path is what gets opened.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pathspec

from waferline.syntax.languages import language_for_path

# Folders no one wants indexed even when a repository forgot to ignore them (a virtualenv holds thousands of files).
DEFAULT_EXCLUDES = (
    ".git/",
    "node_modules/",
    "__pycache__/",
    ".venv/",
    "venv/",
    "site-packages/",
    ".tox/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".pytest_cache/",
)
# Prose that questions about the repository are often answered by; indexed for search only (no tags).
TEXT_LANGUAGES = {".md": "markdown", ".rst": "restructuredtext"}
BINARY_PROBE_BYTES = 8192
GIT_TIMEOUT_S = 60


@dataclass(frozen=True, kw_only=True)
class DiscoveryOptions:
    max_file_bytes: int = 1 << 20
    max_files: int = 50_000
    exclude: tuple[str, ...] = ()  # extra .gitignore-style patterns, relative to the folder
    use_git: bool = True


@dataclass
class Discovery:
    files: list[str]  # relative to the folder, '/'-separated, sorted
    source: str  # "git" or "walk": how the candidate list was made
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> files
    truncated: bool = False  # more than max_files files were found; the rest are left out


def file_language(rel_path: str) -> str | None:
    """The language id a file is indexed as: a tree-sitter language, "markdown"/"restructuredtext", or None."""
    return language_for_path(rel_path) or TEXT_LANGUAGES.get(PurePosixPath(rel_path).suffix.lower())


def discover(root: Path, options: DiscoveryOptions | None = None) -> Discovery:
    options = options or DiscoveryOptions()
    root = root.resolve()
    exclude = pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *options.exclude])
    candidates = git_files(root) if options.use_git else None
    result = Discovery([], "git")
    if candidates is None:
        candidates, result.source = walk_files(root, exclude), "walk"
    for rel in sorted(set(candidates)):
        if file_language(rel) is None:
            result.skipped["no language"] += 1
        elif exclude.match_file(rel):
            result.skipped["excluded"] += 1
        elif (reason := check_file(root, rel, options.max_file_bytes)) is not None:
            result.skipped[reason] += 1
        elif len(result.files) >= options.max_files:
            result.truncated = True
            result.skipped["over max_files"] += 1
        else:
            result.files.append(rel)
    return result


def is_test_path(path: Path | str) -> bool:
    """Whether a file is test code (tests/ folders, test_*.py, *_test.go, *.test.ts, *.spec.js): it ranks lower."""
    parts = [p.lower() for p in Path(path).parts]
    name = parts[-1] if parts else ""
    stem = name.split(".")[0]
    in_test_folder = any(p in ("test", "tests", "testing", "__tests__", "spec") for p in parts[:-1])
    return in_test_folder or stem.startswith("test_") or stem.endswith("_test") or ".test." in name or ".spec." in name


def resolve_inside(root: Path, rel_path: str) -> Path | None:
    """The real path of `root/rel_path` (symlinks followed), or None when it lies outside the resolved `root`."""
    real = Path(os.path.realpath(root / rel_path))
    return real if real.is_relative_to(root) else None


def check_file(root: Path, rel_path: str, max_bytes: int) -> str | None:
    """Why the file must not be indexed, or None when it may be (binary content is checked when it is read)."""
    real = resolve_inside(root, rel_path)
    if real is None:
        return "outside the folder"
    try:
        st = real.stat()
    except OSError:
        return "missing"
    if not stat.S_ISREG(st.st_mode):
        return "not a file"
    return "too large" if st.st_size > max_bytes else None


def read_source(root: Path, rel_path: str, max_bytes: int) -> bytes | None:
    """The file's bytes, or None when it is outside the folder, not a regular file, too large or binary."""
    real = resolve_inside(root, rel_path)
    if real is None:
        return None
    try:
        with open(real, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            data = f.read(max_bytes + 1)
    except OSError:
        return None
    if len(data) > max_bytes or b"\0" in data[:BINARY_PROBE_BYTES]:
        return None
    return data


def git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-but-not-ignored files under `root`, or None when git is missing or it is no work tree."""
    git = shutil.which("git")
    if git is None:
        return None
    base = [git, "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false"]
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    try:
        # A folder that its enclosing repository ignores (a Python install inside ~/.pyenv) lists nothing: walk it.
        ignored = subprocess.run([*base, "check-ignore", "-q", "."], cwd=root, capture_output=True, env=env,
                                 timeout=GIT_TIMEOUT_S, check=False)  # fmt: skip
        if ignored.returncode == 0:
            return None
        listing = [*base, "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        done = subprocess.run(listing, cwd=root, capture_output=True, env=env, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def walk_files(root: Path, exclude: pathspec.GitIgnoreSpec) -> list[str]:
    """Files under `root` that the `.gitignore` files (and `exclude`) do not ignore; symlinked folders not followed."""
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = []  # (folder relative to root, its .gitignore), outermost first
    info_exclude = root / ".git" / "info" / "exclude"
    if info_exclude.is_file():
        specs.append(("", _read_spec(info_exclude)))
    out: list[str] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        rel_folder = os.path.relpath(folder, root).replace(os.sep, "/")
        rel_folder = "" if rel_folder == "." else rel_folder
        specs = [(d, s) for d, s in specs if d == "" or rel_folder == d or rel_folder.startswith(d + "/")]
        if ".gitignore" in files:
            gitignore = Path(folder) / ".gitignore"
            if gitignore.is_file():
                specs.append((rel_folder, _read_spec(gitignore)))
        prefix = f"{rel_folder}/" if rel_folder else ""
        dirs[:] = [d for d in dirs if not _ignored(prefix + d + "/", specs, exclude)]
        out.extend(prefix + f for f in files if not _ignored(prefix + f, specs, exclude))
    return out


def _read_spec(path: Path) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(path.read_text("utf-8", "replace").splitlines())


def _ignored(rel_path: str, specs: list[tuple[str, pathspec.GitIgnoreSpec]], exclude: pathspec.GitIgnoreSpec) -> bool:
    if exclude.match_file(rel_path):
        return True
    ignored = False
    for folder, spec in specs:  # a deeper .gitignore overrides a shallower one, as in git
        inner = rel_path[len(folder) + 1 :] if folder else rel_path
        decision = spec.check_file(inner).include
        if decision is not None:
            ignored = decision
    return ignored
