"""`waferline bench-index` on the small fixture repository: both phases run and report what they did."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from waferline.benchmarks import index as index_bench

FIXTURE = Path(__file__).parents[1] / "server" / "fixtures" / "repos" / "polyglot"


def test_bench_index_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "polyglot"
    shutil.copytree(FIXTURE, root)
    parser = argparse.ArgumentParser()
    index_bench.add_arguments(parser)
    args = parser.parse_args([str(root), "--json", "--workers", "0", "--cache-dir", str(tmp_path / "cache")])
    assert index_bench.run(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["cold"]["files"], result["cold"]["parsed"]) == (13, 13)
    assert (result["warm"]["parsed"], result["warm"]["reused"]) == (0, 13)
    assert result["warm"]["counts"] == result["cold"]["counts"]
    assert set(result["warm"]["lookups_ms"]) == {"definitions", "references", "hover", "search"}


def test_bench_index_rejects_a_missing_folder(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    index_bench.add_arguments(parser)
    with pytest.raises(ValueError, match="not a folder"):
        index_bench.run(parser.parse_args([str(tmp_path / "nope")]))
