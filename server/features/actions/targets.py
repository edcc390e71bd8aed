"""Which code actions the cursor offers, and the one syntax node each would rewrite: tree lookups only, no model.

A `Target` names the node an action is confined to and the span inside it that the model's text replaces, with the
fixed text around that span (`head` and `tail`: the indentation of a new line, a docstring's quotes, a comment
marker). Finding targets costs a walk up the tree from the cursor, so `textDocument/codeAction` answers at once;
`codeAction/resolve` finds the same target again (same document version, same range) and only then runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from waferline.syntax.languages import doc_comment
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import SyntaxTree, collect_errors

COMPLETE_BODY = "complete_body"
DOCSTRING = "docstring"
REGENERATE = "regenerate"
REPAIR = "repair"
REWRITE = "rewrite"


@dataclass(frozen=True)
class NodeTypes:
    """The node types of a grammar that code actions look for (comment markers are in syntax/languages.py)."""

    functions: frozenset[str]
    classes: frozenset[str]
    containers: frozenset[str]  # nodes whose children are statements or members
    braces: bool  # a function body is `{ ... }`
    wrappers: frozenset[str] = frozenset()  # nodes that wrap a definition (`export`, decorators, templates)


def _n(functions: str, classes: str, containers: str, braces: bool, wrappers: str = "") -> NodeTypes:
    """NodeTypes from space-separated node type names."""
    return NodeTypes(frozenset(functions.split()), frozenset(classes.split()), frozenset(containers.split()), braces,
                     frozenset(wrappers.split()))  # fmt: skip


_JS = _n(
    "function_declaration method_definition function_expression arrow_function generator_function_declaration",
    "class_declaration abstract_class_declaration interface_declaration",
    "program statement_block class_body",
    True,
    "export_statement",
)
NODE_TYPES: dict[str, NodeTypes] = {
    "python": _n("function_definition", "class_definition", "module block", False, "decorated_definition"),
    "javascript": _JS, "javascriptreact": _JS, "typescript": _JS, "typescriptreact": _JS,
    "go": _n("function_declaration method_declaration func_literal", "type_declaration",
             "source_file block statement_list", True),
    "rust": _n("function_item", "struct_item enum_item trait_item impl_item", "source_file block declaration_list",
               True),
    "java": _n("method_declaration constructor_declaration",
               "class_declaration interface_declaration enum_declaration record_declaration",
               "program block class_body constructor_body interface_body", True),
    "c": _n("function_definition", "struct_specifier", "translation_unit compound_statement", True),
    "cpp": _n("function_definition", "class_specifier struct_specifier",
              "translation_unit compound_statement field_declaration_list declaration_list", True,
              "template_declaration"),
    "lua": _n("function_declaration function_definition", "", "chunk block", False),
}  # fmt: skip
_PY_PLACEHOLDERS = ("pass", "...", "raise NotImplementedError", "raise NotImplementedError()")
_RUST_PLACEHOLDERS = ("todo!()", "unimplemented!()")


@dataclass(frozen=True)
class Target:
    kind: str
    title: str
    node_start: int  # str offsets of the node the edit is confined to (a doc comment goes at its line's start)
    node_end: int
    start: int  # the span the new text replaces, inside [node_start, node_end]
    end: int
    head: str = ""  # fixed text before the model's, and after it
    tail: str = ""
    max_lines: int = 1  # lines the model may write


class Source:
    """A document's text and tree with offset conversions (tree-sitter counts bytes, the document characters)."""

    def __init__(self, text: str, language_id: str, tree: SyntaxTree) -> None:
        self.text = text
        self.language_id = language_id
        self.nodes = NODE_TYPES.get(language_id)
        self.root = tree.root if tree.source == text.encode("utf-8", "surrogatepass") else None
        self.source = tree.source

    def offset(self, byte: int) -> int:
        return len(self.source[:byte].decode("utf-8", "surrogatepass"))

    def byte(self, offset: int) -> int:
        return utf8_len(self.text[:offset])

    def span(self, node: Node) -> tuple[int, int]:
        return self.offset(node.start_byte), self.offset(node.end_byte)

    def line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def indent_at(self, offset: int) -> str:
        start = self.line_start(offset)
        line = self.text[start : self.text.find("\n", start) if "\n" in self.text[start:] else len(self.text)]
        return line[: len(line) - len(line.lstrip(" \t"))]

    def indent_unit(self) -> str:
        """The file's indentation step: a tab if lines start with tabs, else its smallest indentation, else 4."""
        widths = []
        for line in self.text.split("\n")[:2000]:
            if line.startswith("\t"):
                return "\t"
            stripped = len(line) - len(line.lstrip(" "))
            if 0 < stripped < len(line):
                widths.append(stripped)
        return " " * min(widths) if widths else "    "

    def node_text(self, node: Node) -> str:
        return self.source[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


def enclosing(node: Node | None, types: frozenset[str]) -> Node | None:
    while node is not None and node.type not in types:
        node = node.parent
    return node


def statements(body: Node) -> list[Node]:
    return [c for c in body.named_children if c.type != "comment"]


def python_docstring(body: Node) -> Node | None:
    first = body.named_children[0] if body.named_children else None
    if first is None or first.type != "expression_statement" or first.named_child_count != 1:
        return None
    return first if first.named_children[0].type in ("string", "concatenated_string") else None


def is_placeholder_body(src: Source, fn: Node) -> bool:
    """A function body that is empty, `pass`, `...`, `raise NotImplementedError`, `todo!()` or only comments."""
    body = fn.child_by_field_name("body")
    if body is None:
        return src.language_id == "lua"  # `function f() end`
    rest = statements(body)
    if src.language_id == "python":
        if rest and python_docstring(body) is rest[0]:
            rest = rest[1:]
        return all(src.node_text(s).strip() in _PY_PLACEHOLDERS for s in rest)
    if src.language_id == "rust":
        return all(src.node_text(s).strip().rstrip(";") in _RUST_PLACEHOLDERS for s in rest)
    return not rest


def has_doc(src: Source, node: Node) -> bool:
    """A Python docstring, or a comment right above the definition (or its wrapper)."""
    if src.language_id == "python":
        body = node.child_by_field_name("body")
        return body is not None and python_docstring(body) is not None
    outer = outer_node(src, node)
    prev = outer.prev_named_sibling
    return prev is not None and prev.type == "comment" and prev.end_point[0] >= outer.start_point[0] - 1


def outer_node(src: Source, node: Node) -> Node:
    assert src.nodes is not None, "targets exist only for languages with a NODE_TYPES row"
    while node.parent is not None and node.parent.type in src.nodes.wrappers:
        node = node.parent
    return node


def body_target(src: Source, fn: Node) -> Target | None:
    """Complete this function body: the placeholder statements (or the inside of the braces) become the model's."""
    s_fn, e_fn = src.span(fn)
    body = fn.child_by_field_name("body")
    indent = src.indent_at(s_fn)
    inner = indent + src.indent_unit()
    title = "waferline: complete this function body"
    if src.language_id == "python" and body is not None:
        doc = python_docstring(body)
        rest = [c for c in body.named_children if c is not doc]
        if body.start_point[0] == fn.start_point[0]:  # `def f(): pass`: the body moves to lines of its own
            s, e = src.span(body)
            return Target(COMPLETE_BODY, title, s_fn, e_fn, s, e, "\n" + inner, "", 40)
        if not rest:  # only a docstring
            at = src.span(body)[1]
            return Target(COMPLETE_BODY, title, s_fn, e_fn, at, at, "\n" + src.indent_at(at), "", 40)
        # a comment before the first statement (`# TODO`) is the def's child, not the block's: it goes too
        colon = next((c for c in fn.children if c.type == ":"), None)
        comments = [
            c for c in fn.children if c.type == "comment" and colon is not None and c.start_byte > colon.end_byte
        ]
        first = min([rest[0], *comments], key=lambda n: n.start_byte)
        s, e = src.offset(first.start_byte), src.span(body)[1]
        return Target(COMPLETE_BODY, title, s_fn, e_fn, s, e, "", "", 40)
    if body is None:  # Lua `function f() end`: between the parameters and `end`
        params = fn.child_by_field_name("parameters")
        last = fn.children[-1] if fn.children else None
        if params is None or last is None or last.type != "end":
            return None
        s, e = src.offset(params.end_byte), src.offset(last.start_byte)
    elif src.nodes is not None and src.nodes.braces:
        s, e = src.span(body)
        if src.text[s : s + 1] != "{" or src.text[e - 1 : e] != "}":
            return None
        s, e = s + 1, e - 1
    else:  # a Lua block of only comments
        s, e = src.span(body)
    return Target(COMPLETE_BODY, title, s_fn, e_fn, s, e, "\n" + inner, "\n" + indent, 40)


def doc_target(src: Source, node: Node) -> Target | None:
    """Write a docstring: inside a Python definition, before the body; elsewhere a comment above the definition."""
    s_node, e_node = src.span(node)
    name_node = node.child_by_field_name("name")
    name = src.node_text(name_node) if name_node is not None else "this definition"
    title = f"waferline: write a docstring for {name}"
    if src.language_id == "python":
        body = node.child_by_field_name("body")
        if body is None or body.start_point[0] == node.start_point[0]:
            return None
        at = src.line_start(src.offset(body.start_byte))
        return Target(DOCSTRING, title, s_node, e_node, at, at, src.indent_at(src.offset(body.start_byte)) + '"""',
                      '"""\n', 8)  # fmt: skip
    assert src.nodes is not None
    outer = outer_node(src, node)
    at = src.line_start(src.offset(outer.start_byte))
    s_outer, e_outer = src.span(outer)
    marker = doc_comment(src.language_id)
    return Target(DOCSTRING, title, at, e_outer, at, at, src.indent_at(s_outer) + marker + " ", "\n", 1)


def statement_at(src: Source, byte: int) -> Node | None:
    """The innermost statement (or member) around a byte: a node whose parent holds statements."""
    assert src.root is not None and src.nodes is not None
    node: Node | None = src.root.descendant_for_byte_range(byte, byte)
    while node is not None and node.parent is not None and node.parent.type not in src.nodes.containers:
        node = node.parent
    if node is None or node.parent is None or node.type == "comment" or node.is_error:
        return None
    return node


def regenerate_target(src: Source, node: Node) -> Target:
    s, e = src.span(node)
    lines = src.text.count("\n", s, e) + 1
    what = "statement" if lines == 1 else "block"
    return Target(REGENERATE, f"waferline: regenerate this {what}", s, e, s, e, "", "", 1 if lines == 1 else lines + 4)


def repair_target(src: Source, lo: int, hi: int) -> Target | None:
    """The smallest statement around the first syntax error touching bytes [lo, hi]."""
    assert src.root is not None and src.nodes is not None
    for err in collect_errors(src.root, src.source, 64):
        if err.end_byte < lo or err.start_byte > hi:
            continue
        # a zero-width MISSING token: the node that ends where it is missing (the smallest node at its byte could be
        # the enclosing block)
        lo_err = err.start_byte - 1 if err.start_byte == err.end_byte and err.start_byte > 0 else err.start_byte
        node: Node | None = src.root.descendant_for_byte_range(lo_err, err.end_byte)
        while node is not None and node.parent is not None and node.parent.type not in src.nodes.containers:
            node = node.parent
        if node is None or node.parent is None:  # the whole file is one error: the lines around the error instead
            s = src.line_start(src.offset(err.start_byte))
            e = src.text.find("\n", src.offset(err.end_byte))
            e = len(src.text) if e < 0 else e
        else:
            s, e = src.span(node)
        lines = src.text.count("\n", s, e) + 1
        return Target(REPAIR, "waferline: repair the syntax error here", s, e, s, e, "", "", lines + 2)
    return None


def rewrite_target(src: Source, start: int, end: int) -> Target | None:
    """The selection widened to whole nodes: the smallest node covering it, or the statements it touches."""
    assert src.root is not None and src.nodes is not None
    lo, hi = src.byte(start), src.byte(end)
    cover: Node | None = src.root.descendant_for_byte_range(lo, hi)
    while cover is not None and not cover.is_named:
        cover = cover.parent
    if cover is None:
        return None
    if cover.type in src.nodes.containers:
        touched = [c for c in cover.named_children if c.end_byte > lo and c.start_byte < hi]
        if not touched:
            return None
        s, e = src.offset(touched[0].start_byte), src.offset(touched[-1].end_byte)
    else:
        s, e = src.span(cover)
    return Target(REWRITE, "waferline: rewrite the selection as instructed…", s, e, s, e, "", "",
                  src.text.count("\n", s, e) + 20)  # fmt: skip


def find_targets(src: Source, start: int, end: int) -> list[Target]:
    """Every action the range [start, end) (str offsets; a cursor when equal) offers, most specific first."""
    if src.root is None or src.nodes is None:
        return []
    lo, hi = src.byte(start), src.byte(end)
    out: list[Target] = []
    line_end = src.text.find("\n", end)
    line_lo, line_hi = src.byte(src.line_start(start)), src.byte(len(src.text) if line_end < 0 else line_end)
    if src.root.has_error and (t := repair_target(src, line_lo, line_hi)) is not None:  # an error on these lines
        out.append(t)
    here = src.root.descendant_for_byte_range(lo, hi)
    fn = enclosing(here, src.nodes.functions)
    if fn is not None and is_placeholder_body(src, fn) and (t := body_target(src, fn)) is not None:
        out.append(t)
    documented = enclosing(here, src.nodes.functions | src.nodes.classes)
    if documented is not None and not has_doc(src, documented) and (t := doc_target(src, documented)) is not None:
        out.append(t)
    if start == end or src.text.count("\n", start, end) == 0:
        stmt = statement_at(src, lo)
        if stmt is not None and not stmt.has_error:
            out.append(regenerate_target(src, stmt))
    if start != end and (t := rewrite_target(src, start, end)) is not None:
        out.append(t)
    return out
