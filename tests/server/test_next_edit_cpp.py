"""C++'s own rules in the rename candidate (features/next_edit/lexical_cpp.py): what tree-sitter-cpp reads one way
and the compiler another. Each case here came from a C++ structural case of `waferline eval-nes` that failed
(yaml-cpp's src/emit.cpp, src/parse.cpp; double-conversion's double-to-string.cc)."""

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


def test_a_parameter_read_by_a_direct_initialisation_is_renamed_there() -> None:
    s = Session(DIRECT, "cpp")
    s.edit("string& input", "input", "text")
    assert s.follow() == DIRECT.replace("input", "text")
    s = Session(DIRECT, "cpp")
    s.edit("Emitter& out", "out", "emitter")
    assert s.follow() == DIRECT.replace("& out", "& emitter").replace("(out,", "(emitter,")


def test_a_local_declared_by_a_direct_initialisation_is_followed() -> None:
    # every use in its scope, however far (the text substitution, which served it before, stopped at the first)
    text = (
        "int Count(const Node& node) {\n  NodeEvents events(node);\n"
        + "  step();\n" * 40
        + ("  return g(events, events);\n}\nint Other(NodeEvents& events) {\n  return events.size();\n}\n")
    )
    s = Session(text, "cpp")
    s.edit("events(node", "events", "emit")
    assert s.follow() == text.replace("events(node)", "emit(node)").replace("g(events, events)", "g(emit, emit)")
    s = Session(DIRECT, "cpp")
    s.edit("stream(input", "stream", "in")
    assert s.follow() == DIRECT.replace("stream stream(", "stream in(").replace("Build(stream", "Build(in")
