"""Block-scoped languages' name scopes, read from a tree-sitter tree: JavaScript, TypeScript (and TSX) and Go.

What features/next_edit/scopes.py is for Python, for languages whose variables are declared: every declaration of a
name (a parameter, `let`/`const`/`var`, a `function` or `class`, a `catch` or `for` variable; Go's parameters,
`:=`, `var`, `const`, `range`, `func`) is found with the scope it declares the name in (a function for parameters
and JavaScript's `var`, else the block around it, the program at the top), so a rename follows one variable: every
`identifier` of that name in the scope, except inside a nested scope that declares the name again. A rename is
refused (exact or not shown) where the name is also spelled, in the variable's scope, in a way a rename of the
variable alone cannot follow: JavaScript's `{name}` shorthand (the key would change with it), an import or export
specifier, a Go composite literal's `name:` key of a type not known (a field or a variable); or where the name is
declared twice in the same scope (but JavaScript's `var x` twice in a function, and Go's later `x, err :=` in the
block: one variable). Go's own rules (a name in scope after its statement, keys of known types) are lexical_go.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from waferline.server.features.next_edit import lexical_go
from waferline.server.features.next_edit.source import Source, walk


@dataclass(frozen=True)
class Rules:
    functions: tuple[str, ...]  # nodes whose parameters are declared in them
    blocks: tuple[str, ...]  # nodes that scope a block's declarations (the program included)
    root: str
    arguments: str  # a call's argument list
    refused_parents: tuple[str, ...] = ()  # an identifier under one of these: its name cannot be renamed alone
    refused_types: tuple[str, ...] = ()  # a node spelling the name that a rename cannot follow


_JS_FUNCTIONS = (
    "function_declaration", "function_expression", "function", "generator_function_declaration", "generator_function",
    "arrow_function", "method_definition",
)  # fmt: skip
_JS_BLOCKS = ("program", "statement_block", "for_statement", "for_in_statement", "catch_clause", "class_body",
              "switch_body")  # fmt: skip
JS = Rules(_JS_FUNCTIONS, _JS_BLOCKS, "program", "arguments",
           refused_parents=("import_specifier", "export_specifier", "namespace_import", "import_clause"),
           refused_types=("shorthand_property_identifier", "shorthand_property_identifier_pattern"))  # fmt: skip
_GO_BLOCKS = ("source_file", "block", "for_statement", "if_statement", "switch_statement",
              "expression_switch_statement", "type_switch_statement", "select_statement", "communication_case",
              "expression_case", "type_case", "default_case")  # fmt: skip
GO = Rules(("function_declaration", "method_declaration", "func_literal"), _GO_BLOCKS, "source_file", "argument_list")
RULES = {"javascript": JS, "javascriptreact": JS, "typescript": JS, "typescriptreact": JS, "go": GO}


def rules_for(language_id: str) -> Rules | None:
    return RULES.get(language_id)


@dataclass(frozen=True)
class Declaration:
    node: Node  # the declared identifier
    scope: Node  # where the name is declared


def declarations(src: Source, rules: Rules, name: str, within: Node | None = None) -> list[Declaration] | None:
    """Every declaration of `name` in the file, or None when the name is spelled somewhere a rename cannot follow:
    anywhere in the file, or with `within` (the renamed variable's scope) inside that scope only (a `{name}` in
    another function is another variable's)."""
    out = []
    for n in walk(src.root):
        if n.type in rules.refused_types and src.node_text(n) == name:
            if within is None or _inside(n, within):
                return None
            continue
        if n.type != "identifier" or src.node_text(n) != name:
            continue
        if _refused(n, rules):
            if within is None or _inside(n, within):
                return None
            continue
        scope = declared_in(n, rules)
        if scope is not None:
            out.append(Declaration(n, scope))
    return out


def _refused(node: Node, rules: Rules) -> bool:
    parent = node.parent
    if parent is None:
        return False
    if parent.type in rules.refused_parents:
        return True
    if rules is GO and parent.type == "literal_element":  # T{name: v}: a field's name or a variable, unknown
        return lexical_go.key_kind(node) == "unknown"
    return False


def declared_in(node: Node, rules: Rules) -> Node | None:
    """The scope that the identifier `node` declares its name in, or None when it is a use."""
    return _js_declared_in(node) if rules is JS else _go_declared_in(node)


def _nearest(node: Node, types: tuple[str, ...]) -> Node | None:
    n = node.parent
    while n is not None and n.type not in types:
        n = n.parent
    return n


def _js_declared_in(node: Node) -> Node | None:
    function = js_parameter_of(node)
    if function is not None:
        return function
    parent = node.parent
    if parent is None:
        return None
    if parent.type == "variable_declarator" and parent.child_by_field_name("name") == node:
        holder = parent.parent
        if holder is not None and holder.type == "variable_declaration":  # var: the function's
            return _nearest(node, (*_JS_FUNCTIONS, "program"))
        return _nearest(node, JS.blocks)
    if parent.type in ("function_declaration", "generator_function_declaration", "class_declaration") and (
        parent.child_by_field_name("name") == node
    ):
        return _nearest(parent, JS.blocks)
    if parent.type in ("function_expression", "function", "class") and parent.child_by_field_name("name") == node:
        return parent  # a named function expression's own name
    if parent.type == "for_in_statement" and parent.child_by_field_name("left") == node:
        return parent
    if parent.type == "catch_clause" and parent.child_by_field_name("parameter") == node:
        return parent
    return None


def js_parameter_of(node: Node) -> Node | None:
    """The function whose parameter the identifier `node` is (JavaScript and TypeScript), else None."""
    n, parent = node, node.parent
    if parent is not None and parent.type == "arrow_function" and parent.child_by_field_name("parameter") == node:
        return parent
    while parent is not None and parent.type in ("required_parameter", "optional_parameter", "assignment_pattern",
                                                 "rest_pattern"):  # fmt: skip
        if parent.type == "assignment_pattern" and parent.child_by_field_name("left") != n:
            return None  # inside the default value
        if parent.type in ("required_parameter", "optional_parameter") and parent.child_by_field_name("pattern") != n:
            return None
        n, parent = parent, parent.parent
    if parent is not None and parent.type == "formal_parameters" and parent.parent is not None:
        return parent.parent
    return None


def _go_declared_in(node: Node) -> Node | None:
    parent = node.parent
    if parent is None:
        return None
    if parent.type in ("parameter_declaration", "variadic_parameter_declaration"):
        plist = parent.parent
        function = plist.parent if plist is not None else None
        return function if function is not None and function.type in GO.functions else None
    if parent.type in ("var_spec", "const_spec") and node in parent.children_by_field_name("name"):
        return _go_block(_nearest(parent, GO.blocks))
    if parent.type in ("function_declaration",) and parent.child_by_field_name("name") == node:
        return _nearest(parent, ("source_file",))
    if parent.type == "expression_list":
        holder = parent.parent
        if holder is None:
            return None
        if holder.type == "short_var_declaration" and holder.child_by_field_name("left") == parent:
            block = _nearest(holder, GO.blocks)
            if block is not None and block.type in ("if_statement", "switch_statement", "expression_switch_statement",
                                                    "for_statement", "type_switch_statement"):  # fmt: skip
                return block  # an `if x := ...;` header: the statement's scope
            return _go_block(block)
        if holder.type == "range_clause" and holder.child_by_field_name("left") == parent:
            return _nearest(holder, ("for_statement",)) if lexical_go.declares(holder) else None
        if holder.type == "receive_statement" and holder.child_by_field_name("left") == parent:  # case v := <-ch:
            return _nearest(holder, ("communication_case",)) if lexical_go.declares(holder) else None
        if holder.type == "type_switch_statement" and holder.child_by_field_name("alias") == parent:
            return holder
    return None


def _go_block(block: Node | None) -> Node | None:
    """A function body's own block is its parameters' (Go: one block; `v, err :=` there assigns a parameter)."""
    parent = block.parent if block is not None and block.type == "block" else None
    if parent is not None and parent.type in GO.functions and parent.child_by_field_name("body") == block:
        return parent
    return block


def _visible_from(node: Node, scope: Node, rules: Rules) -> int:
    return lexical_go.visible_from(node, scope) if rules is GO else scope.start_byte


def variable_uses(src: Source, rules: Rules, node: Node, name: str) -> list[Node] | None:
    """The identifiers that are the same variable as the declared identifier `node` (`name`), in document order;
    None when `node` declares nothing, or the rename would not be exact."""
    scope = declared_in(node, rules)
    decls = declarations(src, rules, name, scope)
    if scope is None or decls is None:
        return None
    again = [d.node for d in decls if d.scope == scope and d.node != node]
    if rules is GO and all(n.start_byte > node.start_byte and lexical_go.redeclares(n) for n in again):
        again = []  # a later `x, err :=` in the block assigns this err
    if again and not (rules is JS and all(map(_js_var, [node, *again]))):
        return None  # declared twice in one scope: which one is meant is not clear
    start = _visible_from(node, scope, rules)
    hiding = [(d, _visible_from(d.node, d.scope, rules)) for d in decls if d.scope != scope and _inside(d.scope, scope)]
    out = []
    for n in walk(scope):
        if n.type != "identifier" or src.node_text(n) != name or (n != node and n.start_byte < start):
            continue
        if any(_inside(n, d.scope) and (n == d.node or n.start_byte >= at) for d, at in hiding):
            continue  # a nested declaration's, from where it is in scope
        if rules is GO and lexical_go.key_kind(n) == "field":
            continue
        out.append(n)
    return out


def _js_var(node: Node) -> bool:
    """Whether the identifier `node` is declared by a `var` (every `var` of a name in a function is one variable)."""
    parent = node.parent
    holder = parent.parent if parent is not None else None
    return (
        parent is not None
        and parent.type == "variable_declarator"
        and holder is not None
        and (holder.type == "variable_declaration")
    )


def name_used(src: Source, scope: Node, name: str) -> list[Node]:
    """Every identifier spelling `name` under `scope` (variables, and JavaScript's shorthands)."""
    kinds = ("identifier", *JS.refused_types)
    return [n for n in walk(scope) if n.type in kinds and src.node_text(n) == name]


def _inside(node: Node, scope: Node) -> bool:
    return scope.start_byte <= node.start_byte and node.end_byte <= scope.end_byte and node != scope


# -- JavaScript's `this.name`: a class's fields and methods -----------------------------------------------------------

_MEMBER_DEFINITIONS = ("public_field_definition", "field_definition", "method_definition")
_PROPERTY = ("property_identifier", "private_property_identifier")


def class_member(node: Node) -> Node | None:
    """The class body whose member the property identifier `node` names (`this.name`, a field, a method)."""
    parent = node.parent
    if node.type not in _PROPERTY or parent is None:
        return None
    if parent.type == "member_expression":
        obj = parent.child_by_field_name("object")
        if obj is None or obj.type != "this" or parent.child_by_field_name("property") != node:
            return None
        return _this_class(parent)
    if parent.type in _MEMBER_DEFINITIONS and parent.parent is not None and parent.parent.type == "class_body":
        return parent.parent
    return None


def _this_class(node: Node) -> Node | None:
    """The class body `this` refers to at `node`: the nearest one, unless a non-arrow function comes first."""
    n = node.parent
    while n is not None:
        if n.type == "class_body":
            return n
        if n.type in _JS_FUNCTIONS and n.type not in ("arrow_function", "method_definition"):
            return None
        n = n.parent
    return None


def member_uses(src: Source, body: Node, name: str) -> list[Node] | None:
    """The property identifiers of `body`'s class that name its member `name`: `this.name` where `this` is the
    class's (not in a nested class or a `function`), its field or method definition; None when a computed or
    string-keyed member might be it (`this[name]`, `"name": ...`)."""
    out = []
    for n in walk(body):
        if n.type in _PROPERTY and src.node_text(n) == name:
            if class_member(n) != body:
                return None  # `other.name`, or a nested class's: another object's member may be this one
            out.append(n)
        elif n.type == "subscript_expression":
            obj = n.child_by_field_name("object")
            if obj is not None and obj.type == "this":
                return None
    return sorted(out, key=lambda n: n.start_byte)
