"""C++'s own rules in the structural candidates (features/next_edit/lexical_cpp.py): what tree-sitter-cpp reads one
way and the compiler another (from C++ structural cases of `waferline eval-nes` that failed: yaml-cpp's
src/emit.cpp, src/parse.cpp; double-conversion's double-to-string.cc), and an added parameter's call sites, which
C++ did not follow before (its add-parameter-cpp cases: 0 of 11)."""

from __future__ import annotations

from waferline.benchmarks.next_edit_session import Session

# tree-sitter-cpp parses `T name(arg);` in a block as a function's prototype (`arg` a parameter's type); a compiler
# reads a variable `name` initialised from the variable `arg`, when `arg` is one in scope
DIRECT = """Node Load(const std::string& input, Emitter& out) {
  std::stringstream stream(input);
  EmitFromEvents events(out, input);
  NodeBuilder builder;
  return Build(stream, events, builder);
}
"""


def _followed(text: str, needle: str, old: str, new: str) -> str:
    """The C++ file once `old` (in `needle`) is renamed `new` and every suggestion after it accepted."""
    s = Session(text, "cpp")
    s.edit(needle, old, new)
    return s.follow()


def test_a_parameter_read_by_a_direct_initialisation_is_renamed_there() -> None:
    assert _followed(DIRECT, "string& input", "input", "text") == DIRECT.replace("input", "text")
    expected = DIRECT.replace("& out", "& emitter").replace("(out,", "(emitter,")
    assert _followed(DIRECT, "Emitter& out", "out", "emitter") == expected


def test_a_local_declared_by_a_direct_initialisation_is_followed() -> None:
    # every use in its scope, however far (the text substitution, which served it before, stopped at the first)
    text = (
        "int Count(const Node& node) {\n  NodeEvents events(node);\n"
        + "  step();\n" * 40
        + ("  return g(events, events);\n}\nint Other(NodeEvents& events) {\n  return events.size();\n}\n")
    )
    expected = text.replace("events(node)", "emit(node)").replace("g(events, events)", "g(emit, emit)")
    assert _followed(text, "events(node", "events", "emit") == expected
    expected = DIRECT.replace("stream stream(", "stream in(").replace("Build(stream", "Build(in")
    assert _followed(DIRECT, "stream(input", "stream", "in") == expected


CALLS = """namespace yaml {
static int Width(const Node& node, int indent) {
  return node.size() + indent;
}

int Emit(const Node& node, int indent, std::ostream& out) {
  auto later = [&]() { return Width(node, 0); };
  auto copy = [node]() { return Width(node, 1); };
  return Width(node, indent) + later() + copy();
}

struct Emitter {
  int Go(const Node& node, std::ostream& out) { return Width(node, 1) + this->n; }
};
}  // namespace yaml
"""


def _add_out(text: str) -> Session:
    s = Session(text, "cpp")
    s.edit("Width(const Node& node, int indent) {", "int indent", "int indent, std::ostream& out")
    return s


def test_an_added_parameter_is_passed_at_the_calls_of_a_free_function() -> None:
    # the callers' own `out` (a method's too); not in a lambda that does not capture it
    expected = CALLS.replace("int indent) {", "int indent, std::ostream& out) {").replace(
        "Width(node, 0)", "Width(node, 0, out)"
    )
    expected = expected.replace("Width(node, indent)", "Width(node, indent, out)").replace(
        "{ return Width(node, 1) + this", "{ return Width(node, 1, out) + this"
    )
    assert _add_out(CALLS).follow() == expected


def test_an_added_parameter_is_not_followed_where_another_width_may_be_called() -> None:
    for why, text in (
        ("a qualified call", CALLS.replace("return Width(node, indent)", "return yaml::Width(node, indent)")),
        ("a method of the name", CALLS.replace("  int Go(", "  int Width(int a) { return a; }\n  int Go(")),
        ("a prototype", CALLS.replace("static int Width", "int Width(const Node&, int);\nstatic int Width")),
        ("a template", CALLS.replace("static int Width", "template <typename T>\nint Width")),
    ):
        assert _add_out(text).ask() is None, why
