"""Java's, C's and C++'s scopes for the rename candidate (features/next_edit/lexical_declared.py).

Followed: a method's, constructor's or lambda's parameter (Java), a function's or lambda's parameter (C, C++; a
function pointer `int (*cb)(int)` included), a local from its declarator to the end of the block around it (a `for`
initialiser's: the loop; Java's `switch` group's: the `switch` block), a `catch` parameter, Java's enhanced-`for`
and try-with-resources variables, C++'s range-`for` and structured bindings. Fields, globals and functions are not
followed. Not a variable: a field access's field (`this.x`, `o.x`: Java's field and a local of the same name are two
things, and `this.x = x` keeps its `this.x`), a method's name, a label, an annotation's name and keys, a qualified
name's parts (`std::max`, `a.b.C` in an import). Refused: a binding of the old name again in the scope (C's and
C++'s shadowing in a nested block, a lambda's parameter, Java's `instanceof` pattern), a nested class body (Java's
anonymous and local classes, a C++ local class) that spells either name (its inherited members are not known), a
Java `case` label of either name (an enum constant), and in C and C++ the preprocessor: any `#` line inside the
function, a `#define` anywhere in the file that spells either name (its body may read the variable; not after `->`
or `.`, a field's name, nor as one of the macro's parameters), or one that pastes tokens (`a##j`) whose macro the
function uses.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from waferline.server.features.next_edit.lexical_declared import Refused, Scope, Scoping, spells, word
from waferline.server.features.next_edit.source import Source


def _nearest(node: Node, types: tuple[str, ...]) -> Node | None:
    n = node.parent
    while n is not None and n.type not in types:
        n = n.parent
    return n


def _is_field(parent: Node, node: Node, field: str) -> bool:
    return parent.child_by_field_name(field) == node


# -- Java -------------------------------------------------------------------------------------------------------------

_JAVA_FUNCTIONS = ("method_declaration", "constructor_declaration", "compact_constructor_declaration",
                   "lambda_expression")  # fmt: skip
_JAVA_BLOCKS = ("block", "constructor_body", "switch_block", "for_statement")
_JAVA_NAMED = ("class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
               "method_declaration", "constructor_declaration", "annotation", "marker_annotation",
               "element_value_pair", "enum_constant", "annotation_type_declaration")  # fmt: skip
_JAVA_NOT_VARIABLES = ("labeled_statement", "break_statement", "continue_statement", "scoped_identifier",
                       "package_declaration", "import_declaration")  # fmt: skip
_JAVA_BODIES = ("class_body", "interface_body", "enum_body", "annotation_type_body")


class JavaScoping(Scoping):
    functions = _JAVA_FUNCTIONS

    def declared_at(self, src: Source, node: Node, name: str = "") -> Scope | None:
        parent = node.parent
        if parent is None:
            return None
        params = None
        if parent.type == "formal_parameter" and _is_field(parent, node, "name"):
            params = parent.parent
        elif parent.type == "variable_declarator" and _is_field(parent, node, "name"):
            holder = parent.parent
            if holder is not None and holder.type == "spread_parameter":
                params = holder.parent
            elif holder is not None and holder.type == "local_variable_declaration":
                block = _nearest(holder, _JAVA_BLOCKS)
                return None if block is None else Scope(block, node.start_byte, block.end_byte, holder.start_byte)
            else:
                return None  # a field
        elif parent.type == "inferred_parameters":
            params = parent
        elif parent.type == "lambda_expression" and _is_field(parent, node, "parameters"):
            return Scope(parent, node.start_byte, parent.end_byte, node.start_byte)
        elif parent.type == "catch_formal_parameter" and _is_field(parent, node, "name"):
            clause = parent.parent
            return None if clause is None else Scope(clause, node.start_byte, clause.end_byte, parent.start_byte)
        elif parent.type == "enhanced_for_statement" and _is_field(parent, node, "name"):
            return Scope(parent, node.start_byte, parent.end_byte, parent.start_byte)
        elif parent.type == "resource" and _is_field(parent, node, "name"):
            statement = _nearest(parent, ("try_with_resources_statement",))
            return None if statement is None else Scope(statement, node.start_byte, statement.end_byte,
                                                        parent.start_byte)  # fmt: skip
        function = params.parent if params is not None else None
        if params is None or function is None or function.type not in _JAVA_FUNCTIONS:
            return None
        return Scope(function, params.start_byte, function.end_byte, params.start_byte)

    def binds(self, node: Node) -> bool:
        parent = node.parent
        if parent is None:
            return False
        if parent.type in ("inferred_parameters", "type_pattern", "record_pattern_component"):
            return True
        if parent.type == "lambda_expression":
            return _is_field(parent, node, "parameters")
        if parent.type in ("formal_parameter", "variable_declarator", "catch_formal_parameter",
                           "enhanced_for_statement", "resource", "instanceof_expression"):  # fmt: skip
            return _is_field(parent, node, "name")
        return False

    def is_use(self, node: Node) -> bool:
        parent = node.parent
        if parent is None or parent.type in _JAVA_NOT_VARIABLES:
            return False
        if parent.type == "field_access":
            return not _is_field(parent, node, "field")
        if parent.type == "method_invocation":
            return not _is_field(parent, node, "name")
        if parent.type == "method_reference":
            return parent.named_children[0] == node
        if parent.type in _JAVA_NAMED:
            return not (_is_field(parent, node, "name") or _is_field(parent, node, "key"))
        return True

    def opaque(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        if node.type in _JAVA_BODIES:
            if spells(src, node, names):
                raise Refused  # an anonymous or local class: its inherited members are not known
            return True
        return False

    def refuses(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        parent = node.parent
        return (node.type == "identifier" and parent is not None and parent.type == "switch_label"
                and src.node_text(node) in names)  # fmt: skip


# -- C and C++ --------------------------------------------------------------------------------------------------------

_C_FUNCTIONS = ("function_definition", "lambda_expression")
_C_BLOCKS = ("compound_statement", "for_statement", "for_range_loop", "if_statement", "while_statement",
             "switch_statement")  # fmt: skip
_C_WRAPPERS = ("pointer_declarator", "array_declarator", "parenthesized_declarator", "attributed_declarator",
               "init_declarator", "function_declarator", "reference_declarator", "structured_binding_declarator",
               "abstract_function_declarator")  # fmt: skip
_C_FIELDLESS = ("parenthesized_declarator", "reference_declarator", "structured_binding_declarator")
_C_HOLDERS = ("parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration",
              "declaration", "for_range_loop", "function_definition")  # fmt: skip
_C_NOT_VARIABLES = ("qualified_identifier", "template_function", "destructor_name", "using_declaration",
                    "namespace_alias_definition", "attribute", "preproc_params", "preproc_def",
                    "preproc_function_def", "preproc_ifdef", "preproc_defined")  # fmt: skip
_PREPROCESSOR = re.compile(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*")
_DEFINE = re.compile(r"[ \t]*#[ \t]*define\b")
_MACRO_NAME = re.compile(r"[ \t]*#[ \t]*define[ \t]+(\w+)")


def _c_holder(node: Node) -> tuple[Node, Node, bool] | None:
    """(the declaration or parameter the identifier `node` is declared by, the declarator below it, whether the
    identifier names a function: a prototype or a definition)."""
    child, parent, first = node, node.parent, None
    while parent is not None and parent.type in _C_WRAPPERS:
        if parent.type not in _C_FIELDLESS and not _is_field(parent, child, "declarator"):
            return None  # an array's size, an initialiser's value
        first = first or parent
        child, parent = parent, parent.parent
    if parent is None or parent.type not in _C_HOLDERS or child not in parent.children_by_field_name("declarator"):
        return None
    return parent, child, first is not None and first.type == "function_declarator"


_MACRO_PARAMS = re.compile(r"[ \t]*#[ \t]*define[ \t]+\w+\(([^)]*)\)")


def _reads(define: str, names: tuple[str, ...], patterns: list[re.Pattern[str]]) -> bool:
    """A `#define` line may read a variable of one of `names` (`patterns`: theirs, not after `->` or `.`): not
    when it is one of the macro's own parameters (`#define isatty(fd) isreallyatty(fd)`)."""
    params = _MACRO_PARAMS.match(define)
    own = {p.strip() for p in params.group(1).split(",")} if params else set()
    return any(n not in own and p.search(define) for n, p in zip(names, patterns, strict=True))


def defines_name(src: Source, name: str) -> bool:
    """A `#define` of the file spells `name` (a macro of the name, or one whose body reads it)."""
    w = word(name)
    return "#" in src.text and any(
        _DEFINE.match(m.group()) and w.search(m.group()) for m in _PREPROCESSOR.finditer(src.text)
    )


class CScoping(Scoping):
    functions = _C_FUNCTIONS

    def declared_at(self, src: Source, node: Node, name: str = "") -> Scope | None:
        found = _c_holder(node)
        if found is None or (found[2] and not self.initialises(found[1])):
            return None
        holder, _, _ = found
        if holder.type == "declaration":
            block = _nearest(holder, (*_C_BLOCKS, "translation_unit", "field_declaration_list"))
            if block is None or block.type in ("translation_unit", "field_declaration_list"):
                return None  # a global or a member
            if _nearest(block, _C_FUNCTIONS) is None and block.type not in _C_FUNCTIONS:
                return None
            return Scope(block, node.start_byte, block.end_byte, holder.start_byte)
        if holder.type == "for_range_loop":
            return Scope(holder, node.start_byte, holder.end_byte, holder.start_byte)
        if holder.type == "function_definition":
            return None
        params = holder.parent
        declarator = params.parent if params is not None else None
        child = declarator
        while child is not None and child.parent is not None and child.parent.type in _C_WRAPPERS:
            child = child.parent
        function = child.parent if child is not None else None
        if params is None or child is None or function is None or function.type not in _C_FUNCTIONS:
            return None  # a prototype's, a function pointer's, a catch's
        if not _is_field(function, child, "declarator") or function.child_by_field_name("body") is None:
            return None
        return Scope(function, params.start_byte, function.end_byte, params.start_byte)

    def initialises(self, declarator: Node) -> bool:
        """The function declarator (a prototype, to the parser) declares a variable (C++'s `T x(y);`)."""
        return False

    def binds(self, node: Node) -> bool:
        parent = node.parent
        if parent is not None and parent.type == "lambda_capture_initializer":
            return _is_field(parent, node, "left")
        if parent is not None and parent.type == "enumerator":
            return _is_field(parent, node, "name")
        return _c_holder(node) is not None

    def is_use(self, node: Node) -> bool:
        parent = node.parent
        return parent is not None and parent.type not in _C_NOT_VARIABLES

    def opaque(self, src: Source, node: Node, names: tuple[str, ...]) -> bool:
        if node.type == "field_declaration_list":
            if spells(src, node, names):
                raise Refused  # a local class: its members' names
            return True
        return False

    def file_refuses(self, src: Source, scope: Scope, names: tuple[str, ...]) -> bool:
        if "#" not in src.text:
            return False
        function = scope.container if scope.container.type in _C_FUNCTIONS else _nearest(scope.container, _C_FUNCTIONS)
        f0, f1 = src.span(function if function is not None else scope.container)
        patterns = [re.compile(r"(?<!->)(?<!\.)" + word(n).pattern) for n in names]  # `(h)->loop` reads a field
        macros: dict[str, str] = {}
        for m in _PREPROCESSOR.finditer(src.text):
            line = m.group()
            if f0 <= m.start() < f1 or (_DEFINE.match(line) and _reads(line, names, patterns)):
                return True  # conditional compilation in the function, or a macro that may read the variable
            if (name := _MACRO_NAME.match(line)) is not None:
                macros[name.group(1)] = line
        pasting = {n for n, body in macros.items() if "##" in body}
        while grown := {n for n, body in macros.items() if n not in pasting and any(word(p).search(body)
                                                                                    for p in pasting)}:  # fmt: skip
            pasting |= grown  # a macro that expands one that pastes
        body = src.text[f0:f1]
        return any(word(n).search(body) for n in pasting)  # `a##j`: a macro the function uses makes names


JAVA = JavaScoping()
C = CScoping()
