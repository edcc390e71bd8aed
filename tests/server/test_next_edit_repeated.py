"""The user's edit repeated beyond the sibling block (server/features/next_edit/repeated.py), in process: each case
edits a document as a user would and checks the suggestion, or the whole file after following the chain."""

from __future__ import annotations

from waferline.benchmarks.next_edit_session import Session

DOCSTRINGS = '''def bind(**kw):
    """Bind values.

    .. versionchanged:: 20.2.0 See toplevel note
    """
    return kw


def unbind(*keys):
    """Unbind keys.

    .. versionchanged:: 20.2.0 See toplevel note
    """
    return keys


def clear():
    """Clear.

    .. versionchanged:: 20.2.0 See toplevel note
    """
'''


def _replace_line(s: Session, line: str, new: str, nth: int = 0) -> None:
    text = s.doc.text.text
    at = -1
    for _ in range(nth + 1):
        at = text.index(line, at + 1)
    s.replace(at, at + len(line), new)


def test_a_docstring_line_changed_is_changed_in_the_other_docstrings() -> None:
    s = Session(DOCSTRINGS)
    old, new = (
        "    .. versionchanged:: 20.2.0 See toplevel note\n",
        "    .. versionchanged:: 21.1.0 See toplevel note.\n",
    )
    _replace_line(s, old, new, nth=1)
    edit, text = s.ask(), s.doc.text.text
    assert edit is not None and text[edit.start : edit.end] + "\n" == old
    assert edit.start == text.index(old, text.index("def clear"))  # the one below first
    assert s.follow() == DOCSTRINGS.replace(old, new)


TESTS = """class LocaleTests:
    def test_one(self):
        assertEqual(locale.ordinal_number(1), '1')
        assertEqual(locale.ordinal_number(2), '2a')

    def test_two(self):
        assertEqual(locale.ordinal_number(1), '1')
        assertEqual(locale.ordinal_number(2), '2a')
        return None
"""


def test_a_line_of_code_deleted_is_deleted_in_the_other_function() -> None:
    s = Session(TESTS)
    _replace_line(s, "        assertEqual(locale.ordinal_number(2), '2a')\n", "")
    assert s.follow() == TESTS.replace("        assertEqual(locale.ordinal_number(2), '2a')\n", "")


def test_a_duplicate_removed_from_one_function_or_a_short_line_is_not_repeated() -> None:
    dup = "def setup():\n    return [\n        'Topic :: Software Development :: Libraries',\n        'x',\n" \
          "        'Topic :: Software Development :: Libraries',\n    ]\n"  # fmt: skip
    s = Session(dup)
    _replace_line(s, "        'Topic :: Software Development :: Libraries',\n", "", nth=1)
    assert s.ask() is None  # the same list: a duplicate removed
    s = Session(TESTS)
    _replace_line(s, "        return None\n", "")
    assert s.ask() is None  # no other occurrence
    short = "def a():\n    idx = 0\n    return idx\n\n\ndef b():\n    idx = 0\n    return idx\n"
    s = Session(short)
    _replace_line(s, "    return idx\n", "    return idx + 1\n")
    assert s.ask() is None  # too short to be distinctive, and a change of code


def test_a_line_of_code_changed_is_not_repeated_in_another_function() -> None:
    s = Session(TESTS)
    _replace_line(s, "        assertEqual(locale.ordinal_number(2), '2a')\n",
                  "        assertEqual(locale.ordinal_number(2), '2nd')\n")  # fmt: skip
    assert s.ask() is None  # the same line of code elsewhere is most often changed differently


UNBOUND = """from attr import fields


def _is_attrs_class(cls):
    return getattr(cls, "__attrs_attrs__", None) is not None


HOOKS = [(_is_attrs_class, 1)]


def make():
    return [(_is_attrs_class, 2)]
"""


def test_a_name_no_longer_bound_in_the_file_is_replaced_at_its_other_uses() -> None:
    s = Session(UNBOUND)
    _replace_line(s, "from attr import fields\n", "from attr import fields, has\n")
    at = s.doc.text.text.index("def _is_attrs_class")
    end = s.doc.text.text.index("HOOKS")
    s.replace(at, end, "")
    s.edit("HOOKS = [(_is_attrs_class", "_is_attrs_class", "has")
    assert (
        s.follow() == "from attr import fields, has\n\n\nHOOKS = [(has, 1)]\n\n\ndef make():\n    return [(has, 2)]\n"
    )


def test_a_name_still_bound_in_the_file_is_not_replaced() -> None:
    s = Session(UNBOUND.replace("from attr import fields", "from attr import fields, has"))
    s.edit("HOOKS = [(_is_attrs_class", "_is_attrs_class", "has")
    assert s.ask() is None  # `_is_attrs_class` is still defined: its other use may be meant


CHAIN = """def test_a(e):
    assert 'Both' == e.value.message


def test_b(e):
    assert 'Neither' == e.value.message


def value_of(self):
    return self.value


def other_value(self):
    return self.value
"""


def test_a_two_dot_chain_changed_is_changed_elsewhere_and_a_self_attribute_is_not() -> None:
    s = Session(CHAIN)
    s.edit("'Both' == e.value.message", "message", "args[0]")
    assert s.follow() == CHAIN.replace("e.value.message", "e.value.args[0]")
    s = Session(CHAIN)
    s.edit("return self.value", "value", "normalized")
    assert s.ask() is None  # one dot: which attribute a method reads changes one place at a time


def test_an_older_edit_is_not_repeated_after_the_user_edited_elsewhere() -> None:
    s = Session(TESTS)
    _replace_line(s, "        assertEqual(locale.ordinal_number(2), '2a')\n", "")
    s.edit("class LocaleTests", "LocaleTests", "LocaleCases")
    assert s.ask() is None  # the deletion is not the user's newest edit any more
