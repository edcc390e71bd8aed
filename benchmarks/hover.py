"""Time the deterministic part of hover (describe_symbol + Markdown) on the standard library's index.

Run: `python -m waferline.server.index.hover_bench` — builds the index into a temporary cache (cold), then prints the
median and worst of 5 hovers for names from rare to defined thousands of times (`__init__`). A benchmark, not a test.
"""

from __future__ import annotations

import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

from waferline.server.index.hover import describe_symbol, render_hover_markdown
from waferline.server.index.workspace import WorkspaceIndex

NAMES = ("__init__", "len", "append", "join", "main", "open", "get", "format", "dumps", "JSONDecoder", "urlparse")


def main() -> None:
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


if __name__ == "__main__":  # the index builds with worker processes, which re-import this module
    main()
