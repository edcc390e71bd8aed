"""`waferline bench-hover`: the deterministic part of hover (describe_symbol + Markdown) on the standard library.

Builds the index of the standard library into a temporary cache (cold), then prints the median and worst of 5 hovers
for names from rare to defined thousands of times (`__init__`). A benchmark, not a test: it asserts nothing.
`python -m waferline.benchmarks.hover` runs the same.
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

NAMES = ("__init__", "len", "append", "join", "main", "open", "get", "format", "dumps", "JSONDecoder", "urlparse")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options: the folder (the standard library) and the names are fixed, so that runs compare."""


def run(args: argparse.Namespace) -> int:
    from waferline.server.repository.index import WorkspaceIndex
    from waferline.server.repository.lookup import describe_symbol, render_hover_markdown

    root = Path(sysconfig.get_paths()["stdlib"])
    with tempfile.TemporaryDirectory() as cache:
        index = WorkspaceIndex(root, Path(cache))
        index.build()
        at = root / "json" / "decoder.py"
        for name in NAMES:
            times = []
            for _ in range(5):
                start = time.perf_counter()
                info = describe_symbol(index, name, at)
                if info is not None:
                    render_hover_markdown(info, root)
                times.append((time.perf_counter() - start) * 1000)
            print(f"{name:12s} median {statistics.median(times):6.2f} ms  worst {max(times):6.2f} ms")
    return 0


if __name__ == "__main__":  # the index builds with worker processes ("spawn"), which re-import this module
    import sys

    _parser = argparse.ArgumentParser(prog="waferline bench-hover", description=__doc__)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
