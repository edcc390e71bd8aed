"""`waferline eval-chat`: the cases are well formed against their repository, the scoring of facts, and a real run of
the docstring cases through `waferline serve` with the shipped model (figures are whatever they are; their shape is
checked)."""

from __future__ import annotations

import json
import re

import pytest

from waferline.benchmarks.chat_eval import DATA, holds, load_cases, percentile
from waferline.cli.main import main


def test_every_case_is_well_formed_against_the_repository() -> None:
    cases = load_cases({"ask", "docstring", "rewrite"})
    assert len(cases) >= 20 and len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert case["facts"] and all(re.compile(f) for f in case["facts"])
        if case["kind"] != "ask":
            source = (DATA / "repo" / case["path"]).read_text(encoding="utf-8")
            assert source.count(case.get("select") or case["at"]) == 1, case["id"]


def test_an_answer_holds_when_every_fact_matches() -> None:
    assert holds(["SPRING", "VIP"], "Codes: spring and vip.")
    assert not holds(["SPRING", "VIP"], "Only SPRING.")
    assert not holds(["x"], "")
    assert holds(["^(?![\\s\\S]*\\bcost\\b)"], "price = 1") and not holds(["^(?![\\s\\S]*\\bcost\\b)"], "cost = 1")
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and percentile([], 0.5) is None


def test_a_run_of_the_docstring_cases_with_the_shipped_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval-chat", "--only", "shipped", "--kinds", "docstring,rewrite", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    shipped = out["figures"]["shipped"]
    assert shipped["docstring"]["of"] == 6 and shipped["rewrite"]["of"] == 4
    assert "waferline-mini" in shipped["engine"]
    answers = out["answers"]["shipped"]
    assert all(a["note"] == "not offered" for a in answers if a["kind"] == "rewrite"), "no chat template: no rewrite"
    assert any(a["text"].strip().startswith('"""') for a in answers if a["kind"] == "docstring"), answers
