"""Next-edit suggestions in Rust, Java and C through the real server over LSP (docs/next-edit.md, features/next_edit/
lexical_declared.py): a parameter's rename followed to the end of its chain, a signature's call sites, and a
refused rename answered with no edit (not a text substitution on the lines around)."""

from __future__ import annotations

import pytest
from lsp_support import as_dict, lsp_session, stats
from lsprotocol import types
from test_lsp_next_edit import Client

pytestmark = pytest.mark.asyncio

RUST = """fn area(w: i32, h: i32) -> i32 {
    let total = w * h;
    let p = Point { x: w, y: h };
    total + p.x + w
}

fn main(w: i32, h: i32, depth: i32) -> i32 {
    area(w, h) + area(1, 2)
}
"""


class TypedClient(Client):
    def __init__(self, client: object, uri: str, text: str, language_id: str) -> None:
        self.client, self.uri, self.text, self.version = client, uri, text, 1  # type: ignore[assignment]
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
        ))  # fmt: skip

    def type_over(self, needle: str, old: str, new: str) -> types.Position:
        """`old` (inside the first `needle`) selected and `new` typed over it key by key."""
        at = self.text.index(needle) + needle.index(old)
        self.replace(at, at + len(old), new[:1])
        for i, ch in enumerate(new[1:]):
            self.replace(at + 1 + i, at + 1 + i, ch)
        return self.position(at + len(new))

    async def follow(self, cursor: types.Position) -> list[int]:
        lines = []
        for _ in range(12):
            edits = await self.next_edit(cursor)
            if not edits:
                break
            (edit,) = edits
            assert edit["kind"] == "structural" and edit["textDocument"] == {"uri": self.uri, "version": self.version}
            lines.append(edit["range"]["start"]["line"])
            await self.accept(edit)
            cursor = types.Position(**edit["range"]["end"])
        return lines


async def test_rust_parameter_rename_and_signature_change_followed_over_lsp() -> None:
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = TypedClient(client, "file:///tmp/waferline-test/shapes.rs", RUST, "rust")
        lines = await doc.follow(doc.type_over("area(w", "w", "width"))
        assert doc.text == RUST.replace("area(w: i32", "area(width: i32").replace("w * h", "width * h").replace(
            "x: w,", "x: width,"
        ).replace("p.x + w", "p.x + width")
        assert lines == [1, 2, 3], "each next use in order, one edit per request"
        before = doc.text
        lines = await doc.follow(doc.type_over("area(width: i32, h: i32)", ", h: i32", ", h: i32, depth: i32"))
        assert doc.text == before.replace("h: i32) -> i32 {\n    let", "h: i32, depth: i32) -> i32 {\n    let").replace(
            "area(w, h) + area(1, 2)", "area(w, h, depth) + area(1, 2, depth)"
        )
        assert lines == [7, 7]
        s = as_dict((await stats(client))["inlineEdit"])
        assert s["structural"] == 5 and s["accepted"] == 5


@pytest.mark.parametrize(
    ("uri", "language", "text", "needle", "old", "new"),
    [
        # the macro's tokens spell the local: refused, and no substitution on the sibling lines instead
        ("file:///tmp/waferline-test/m.rs", "rust", "fn f(a: i32) -> i32 {\n    let x = a;\n    g(x);\n"
         "    println!(\"{x}\");\n    x\n}\n", "let x", "x", "z"),
        # a Java local renamed to a name its scope reads (a field's)
        ("file:///tmp/waferline-test/S.java", "java", "class S {\n  int b;\n\n  int f(int a) {\n    int c = a;\n"
         "    c += a;\n    return c + b;\n  }\n}\n", "int c", "c", "b"),
        # C: a macro of the file reads the variable
        ("file:///tmp/waferline-test/m.c", "c", "#define TWICE() (y + y)\nint f(int x) {\n  int y = x;\n"
         "  y += x;\n  return TWICE() + y;\n}\n", "int y", "y", "v"),
    ],
)  # fmt: skip
async def test_refused_renames_answer_no_edit_over_lsp(uri: str, language: str, text: str, needle: str, old: str,
                                                        new: str) -> None:  # fmt: skip
    async with lsp_session("vscode", fixed_text="x") as client:
        doc = TypedClient(client, uri, text, language)
        cursor = doc.type_over(needle, old, new)
        assert await doc.next_edit(cursor) == []
