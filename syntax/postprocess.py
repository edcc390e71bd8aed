"""After generation: stop a streamed completion at the right place, then cut it so that the document still parses.

`should_stop` runs on every streamed partial completion (the engine stops decoding as soon as it says so);
`finish_completion` turns the raw text into what the editor shows: stop rules applied, repeats of the text after the
cursor dropped, brackets the editor auto-closed replaced rather than doubled, and the longest cut at which
prefix + completion + suffix has no syntax error the document did not already have. A completion that cannot be made
to parse is not shown (None).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from waferline.syntax.brackets import CLOSERS, OPENERS, open_brackets, scan_brackets
from waferline.syntax.parse_check import ParseCheck
from waferline.syntax.plan import CompletionPlan, indentation, is_word_char, line_bounds
from waferline.syntax.text import utf8_len
from waferline.syntax.tree import SyntaxError_, SyntaxTree, TreeSnapshot

CLOSERS_BELOW_CHARS = 2000  # how far below the cursor's line a closer of the completion's own brackets is looked for
MAX_PARSES = 8  # candidate cuts checked by parsing, longest first (each is one incremental parse)


@dataclass(frozen=True)
class Finished:
    """What the editor shows: `insert_text` replaces document[offset:replace_end_offset]."""

    insert_text: str
    replace_end_offset: int
    trimmed: bool = False  # shorter than what the model wrote
    errors_before: int = 0  # syntax errors in the document, and in the document with the completion applied
    errors_after: int = 0


@dataclass(frozen=True)
class _Scan:
    cut: int | None  # where the stop rules end the completion, or None when they do not (yet)
    consumed: int  # brackets open at the cursor that the completion (before the cut) closes


def _scan(completion: str, plan: CompletionPlan) -> _Scan:
    rules = plan.stop
    cuts: list[int] = [i for s in rules.stop if (i := completion.find(s)) >= 0]
    # the rest of a block opener's line, when the completion starts on the next line, is not one of its lines
    max_lines = rules.max_lines + completion.startswith("\n")
    for line_no, m in enumerate(re.finditer("\n", completion), start=1):
        if line_no >= max_lines:
            cuts.append(m.start())
            break
        end = completion.find("\n", m.end())
        line = completion[m.end() : end if end >= 0 else len(completion)]
        stripped = line.lstrip(" \t")
        back_at_parent = rules.parent_indent is not None and indentation(line) <= rules.parent_indent
        if back_at_parent and stripped and stripped[0] not in CLOSERS:  # the block being written is over
            cuts.append(m.start())
            break
    own: list[str] = []
    consumed = 0
    for i, ch in scan_brackets(completion, rules.language_id):
        if cuts and i >= min(cuts):
            break
        if ch in OPENERS:
            own.append(ch)
            continue
        if own:
            if own[-1] != CLOSERS[ch]:  # closes what it did not open
                cuts.append(i)
                break
            own.pop()
            continue
        k = len(rules.open_brackets) - 1 - consumed  # the bracket open at the cursor that this closes
        if k < 0 or rules.open_brackets[k] != CLOSERS[ch]:
            cuts.append(i)
            break
        if rules.closed_in_suffix[k] and consumed >= rules.suffix_closers:  # the suffix closes it already
            cuts.append(i)
            break
        consumed += 1
        if rules.block_end:  # the block being written is closed: end with its line
            nl = completion.find("\n", i)
            if nl >= 0:
                cuts.append(nl)
            break
    return _Scan(min(cuts) if cuts else None, consumed)


def should_stop(partial: str, plan: CompletionPlan) -> bool:
    """True as soon as a streamed partial completion has passed a stop point (the engine stops decoding)."""
    return _scan(partial, plan).cut is not None


def enforce_stop_rules(completion: str, plan: CompletionPlan) -> str:
    """The completion up to its first stop point."""
    cut = _scan(completion, plan).cut
    return completion if cut is None else completion[:cut]


def finish_completion(
    text: str, offset: int, language_id: str | None, completion: str, plan: CompletionPlan
) -> Finished | None:
    """What to show for `completion` at `offset` of `text` (the text the plan was made for), or None."""
    stopped = enforce_stop_rules(completion, plan).rstrip()
    line_start, line_end = line_bounds(text, offset)
    stopped = _drop_repeated_lines(stopped, text, line_end)
    if not stopped.strip():
        return None
    candidates = _candidates(stopped, plan, lambda: _closers_below(text, line_end, plan))
    snap = _snapshot_for(text, language_id, plan)
    if snap is None:  # plain text: the stop rules and the repeat check are all there is
        for cand in candidates:
            cand, end = _fit_line_rest(cand, text, offset, line_end, plan)
            if not _repeats_suffix(cand, text, offset, end):
                return Finished(cand, end, cand != completion)
        return None
    cursor_byte = utf8_len(text[:offset])
    line_bytes = (cursor_byte - utf8_len(text[line_start:offset]), cursor_byte + utf8_len(text[offset:line_end]))
    check = ParseCheck(snap, cursor_byte, line_bytes[1])
    base = check.base
    cursor_error = any(e.start_byte <= line_bytes[1] and e.end_byte >= line_bytes[0] for e in base)
    best: tuple[int, str, int] | None = None  # (errors, text, replace end)
    parses = 0
    whole: ParseCheck | None = None  # the whole document's check, made when a region check cannot judge
    for n, cand in enumerate(candidates):
        cand, end = _fit_line_rest(cand, text, offset, line_end, plan)
        if _repeats_suffix(cand, text, offset, end):
            continue
        if parses == MAX_PARSES:
            break
        parses += 1
        inserted = cand.encode("utf-8", "surrogatepass")
        removed = utf8_len(text[offset:end])
        errors = check.errors_with(cursor_byte, cursor_byte + removed, inserted)
        if any(_is_new(e, base, cursor_byte, len(inserted), removed) for e in errors):
            if not (check.region is not None and open_brackets(cand, plan.language_id)):
                continue
            # Python's check parses only the statements around the cursor: a bracket the completion leaves open
            # for the lines below to close (`__all__ = [` over its entries) needs the whole document.
            whole = whole or ParseCheck(snap, cursor_byte, line_bytes[1], whole=True)
            errors = whole.errors_with(cursor_byte, cursor_byte + removed, inserted)
            if any(_is_new(e, whole.base, cursor_byte, len(inserted), removed) for e in errors):
                continue
            best = (0, cand, end)  # nothing new in the whole document
            break
        if best is None or len(errors) < best[0]:
            best = (len(errors), cand, end)
        # The first candidate is taken at once only without errors: where it has some the next is parsed too and
        # wins with fewer (the completion with its own brackets closed goes first, and a line that opens a call whose
        # arguments follow on the next lines, `raise Error(` over them, must stay open).
        if not errors or (not cursor_error and n > 0):  # nothing shorter can do better
            break
    if best is None:
        return None
    return Finished(best[1], best[2], best[1] != completion, len(base), best[0])


def _snapshot_for(text: str, language_id: str | None, plan: CompletionPlan) -> TreeSnapshot | None:
    """The plan's tree when it is the tree of `text`, else a fresh parse (slower, still correct)."""
    snap = plan.snapshot
    if snap is not None and snap.language_id == language_id and len(snap.source) == utf8_len(text):
        return snap
    return SyntaxTree(language_id, text).snapshot()


def _is_new(error: SyntaxError_, base: list[SyntaxError_], at: int, inserted: int, removed: int) -> bool:
    """Whether an error of the edited document is one the document did not have: one strictly inside the
    completion, or one that overlaps no error of the document once mapped back to the document's bytes."""
    if at < error.start_byte and error.end_byte < at + inserted:
        return True

    def back(p: int) -> int:
        return p if p <= at else at if p <= at + inserted else p - inserted + removed

    start, end = back(error.start_byte), back(error.end_byte)
    return not any(e.start_byte <= end and start <= e.end_byte for e in base)


def _closers_below(text: str, line_end: int, plan: CompletionPlan) -> str:
    """The closers in the lines after the cursor's (CLOSERS_BELOW_CHARS of them) that close nothing opened there, in
    order: the first closes the innermost bracket open at the end of the cursor's line."""
    out: list[str] = []
    depth = 0
    for _, ch in scan_brackets(text[line_end : line_end + CLOSERS_BELOW_CHARS], plan.language_id):
        if ch in OPENERS:
            depth += 1
        elif depth:
            depth -= 1
        else:
            out.append(ch)
    return "".join(out)


def _candidates(completion: str, plan: CompletionPlan, closers_below: Callable[[], str] = str) -> list[str]:
    """Cut points to try, longest first: the whole completion (and with its own open brackets closed, unless the
    lines below close them: `raise Error(` over its arguments), then the ends of its lines, then the ends of
    statements, brackets and words on its last line."""
    out = [completion]
    own = open_brackets(completion, plan.language_id)
    # what closes the completion's own brackets, then those open at the cursor that the line leaves open
    needed = "".join(OPENERS[ch] for ch in reversed(own))
    at_cursor = zip(plan.stop.open_brackets, plan.stop.closed_in_suffix, strict=True)
    needed += "".join(OPENERS[ch] for ch, closed in reversed(list(at_cursor)) if not closed)
    if own and "\n" not in completion and not closers_below().startswith(needed):
        out.insert(0, completion + "".join(OPENERS[ch] for ch in reversed(own)))
    newlines = [m.start() for m in re.finditer("\n", completion)]
    out += [completion[:i] for i in reversed(newlines)]
    last = newlines[-1] + 1 if newlines else 0
    for i in range(len(completion) - 1, last, -1):
        prev, here = completion[i - 1], completion[i]
        if prev in ";,:" or prev in CLOSERS or (is_word_char(prev) and not is_word_char(here)) or here == " ":
            out.append(completion[:i])
    seen: set[str] = set()
    unique = []
    for cand in out:
        cand = cand.rstrip()
        if cand.strip() and cand not in seen:
            seen.add(cand)
            unique.append(cand)
    return unique


def _replace_end(text: str, offset: int, line_end: int, completion: str, plan: CompletionPlan) -> int:
    """How far the completion replaces: past the closers the editor auto-inserted after the cursor that the
    completion itself writes (`foo(|)` completed with `a)` replaces the `)` instead of doubling it)."""
    consumed = min(_scan(completion, plan).consumed, plan.stop.suffix_closers)
    end = offset
    for _ in range(consumed):
        while end < line_end and text[end] in " \t":
            end += 1
        assert end < line_end and text[end] in CLOSERS, "suffix_closers counts closers after the cursor"
        end += 1
    return end


def _fit_line_rest(cand: str, text: str, offset: int, line_end: int, plan: CompletionPlan) -> tuple[str, int]:
    """(completion, replace end) with the completion's ending dropped when it repeats the rest of the cursor's line
    (`foo(|);` completed with `a);` shows `a)` replacing the `)`, not a second `;`)."""
    end = _replace_end(text, offset, line_end, cand, plan)
    rest = text[end:line_end].strip()
    if rest and "\n" not in cand and cand.endswith(rest) and cand[: -len(rest)].strip():
        cand = cand[: -len(rest)].rstrip()
        end = _replace_end(text, offset, line_end, cand, plan)
    return cand, end


def _repeats_suffix(completion: str, text: str, offset: int, end: int) -> bool:
    """A completion that only writes what already follows the cursor."""
    body = completion.strip()
    window = 4 * len(completion) + 64
    return (
        not body
        or text[end : end + window].lstrip().startswith(body)
        or text[offset : offset + window].lstrip().startswith(body)  # rewrites the auto-closed text as it is
    )


def _drop_repeated_lines(completion: str, text: str, line_end: int) -> str:
    """Drop the trailing lines of a completion that repeat the lines after the cursor's line (all of it when the
    completion is nothing but those lines)."""
    lines = completion.split("\n")
    following = [ln.strip() for ln in text[line_end : line_end + 200 * len(lines) + 200].splitlines() if ln.strip()]
    for i in range(len(lines)):
        tail = [ln.strip() for ln in lines[i:] if ln.strip()]
        # lines of nothing but closers (`}`) repeat by coincidence; the bracket rules decide about those
        if any(any(is_word_char(ch) for ch in ln) for ln in tail) and tail == following[: len(tail)]:
            return "\n".join(lines[:i])
    return completion
