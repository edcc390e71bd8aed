"""server/framing.py without a transport: bytes in, the messages, refusals and drops they make, for good frames split
anywhere and for every kind of bad frame the reliability issue lists."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferline.server.framing import INVALID_REQUEST, PARSE_ERROR, Dropped, FrameParser, Message, Refused

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {"x": "é\n"}}
NEXT = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}


def body(msg: object) -> bytes:
    return json.dumps(msg).encode()


def frame(msg: object, *, length: object = None, header: bytes = b"Content-Length", eol: bytes = b"\r\n") -> bytes:
    data = body(msg)
    n = len(data) if length is None else length
    return header + b": " + str(n).encode() + eol + eol + data


def values(events: list) -> list:
    return [e.value for e in events if isinstance(e, Message)]


def test_a_good_frame_is_one_message_without_a_problem() -> None:
    events = FrameParser().feed(frame(REQUEST) + frame(NEXT))
    assert events == [Message(REQUEST), Message(NEXT)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=400), max_size=12), st.sampled_from([b"\r\n", b"\n"]))
def test_good_frames_split_anywhere_give_the_same_messages(cuts: list[int], eol: bytes) -> None:
    msgs = [REQUEST, NEXT, {"jsonrpc": "2.0", "method": "exit"}]
    data = b"".join(frame(m, eol=eol) for m in msgs)
    parser, events, last = FrameParser(), [], 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        events += parser.feed(data[last:cut])
        last = cut
    events += parser.feed(data[last:]) + parser.close()
    assert events == [Message(m) for m in msgs]


@pytest.mark.parametrize(
    "header",
    [b"content-length: %d\r\n\r\n", b"CONTENT-LENGTH:%d\n\n", b"Content-Length: %d\n\r\n",
     b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",
     b"Content-Length  :  %d  \r\nX-Other: 1\r\n\r\n"],
)  # fmt: skip
def test_header_names_in_any_case_lf_lines_and_other_headers(header: bytes) -> None:
    data = body(REQUEST)
    assert FrameParser().feed(header % len(data) + data + frame(NEXT)) == [Message(REQUEST), Message(NEXT)]


def bad_then_good(length: object) -> list:
    return FrameParser().feed(frame(REQUEST, length=length) + frame(NEXT))


@pytest.mark.parametrize(
    "length", [10, len(body(REQUEST)) + 7, 0, -5, "abc", "1.5", "", 99999999999999, 9223372036854775808, "9" * 5000]
)
def test_a_wrong_length_costs_nothing_when_another_frame_follows(length: object) -> None:
    """Too short, too long (it swallows the next header), zero, negative, not a number, absurd: the body is read up
    to the next header, and both messages arrive; the first says what was wrong with its frame."""
    events = bad_then_good(length)
    assert values(events) == [REQUEST, NEXT]
    assert events[0].problem and "Content-Length" in events[0].problem
    assert events[1].problem is None


@pytest.mark.parametrize("length", [10, 0, -5, "abc", 99999999999999, 9223372036854775808])
def test_a_wrong_length_on_the_last_frame_is_read_at_once_or_after_a_pause(length: object) -> None:
    parser = FrameParser()
    events = parser.feed(frame(REQUEST, length=length))
    if not events:  # the declared length may still be arriving: a pause decides
        assert parser.pending
        events = parser.idle()
    assert values(events) == [REQUEST] and not parser.pending


def test_a_too_long_length_waits_for_the_pause_then_reads_the_body() -> None:
    parser = FrameParser()
    assert parser.feed(frame(REQUEST, length=len(body(REQUEST)) + 100)) == []
    assert values(parser.idle()) == [REQUEST]
    assert parser.feed(frame(NEXT)) == [Message(NEXT)]


def test_a_body_still_arriving_is_not_judged_at_a_pause() -> None:
    parser, data = FrameParser(), frame(REQUEST)
    assert parser.feed(data[:-5]) == [] and parser.idle() == []
    assert parser.feed(data[-5:]) == [Message(REQUEST)]


def test_a_body_that_is_not_json_is_refused_and_the_next_frame_read() -> None:
    bad = b"Content-Length: 9\r\n\r\n{not json"
    events = FrameParser().feed(bad + frame(NEXT))
    assert isinstance(events[0], Refused) and events[0].code == PARSE_ERROR
    assert events[1:] == [Message(NEXT)]
    parser = FrameParser()
    assert parser.feed(bad) == []
    assert [type(e) for e in parser.idle()] == [Refused]  # its length was all there: a pause decides


def test_garbage_between_frames_is_dropped() -> None:
    for garbage in (b"hello world", b"xyz", b'{"jsonrpc": "2.0"}', b"\x00\xff" * 50, b"junk\r\nmore junk\r\n"):
        events = FrameParser().feed(frame(REQUEST) + garbage + frame(NEXT))
        assert values(events) == [REQUEST, NEXT], garbage
        assert any(isinstance(e, Dropped) for e in events), garbage


def test_headers_without_a_length_or_without_the_empty_line() -> None:
    data = body(REQUEST)
    no_length = b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + data
    no_blank = b"Content-Length: %d\r\n" % len(data) + data
    for bad in (no_length, no_blank):
        events = FrameParser().feed(bad + frame(NEXT))
        assert values(events) == [REQUEST, NEXT] and events[0].problem


def test_an_empty_body_is_dropped_not_answered() -> None:
    events = FrameParser().feed(b"Content-Length: 0\r\n\r\n" + frame(NEXT))
    assert isinstance(events[0], Dropped) and events[1:] == [Message(NEXT)]


def test_a_body_over_the_limit_is_refused_and_skipped_with_bounded_memory() -> None:
    parser, limit = FrameParser(max_body=1000), 1000
    events = parser.feed(b"Content-Length: 99999999999999\r\n\r\n")
    for _ in range(50):  # 50 KB of a body that never ends: held only up to the limit
        events += parser.feed(b"x" * 1000)
        assert len(parser._buf) <= 2 * limit
    events += parser.feed(frame(NEXT))
    assert [type(e) for e in events] == [Refused, Dropped, Message]
    assert events[0].code == INVALID_REQUEST and events[2] == Message(NEXT)


def test_a_five_megabyte_document_passes() -> None:
    big = {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"text": 'é"\\\n' * (5 * 1024 * 1024 // 4)}}
    data = frame(big)
    assert len(data) > 15 * 1024 * 1024  # JSON-escaped: \u00e9, \", \\, \n: three bytes a character
    parser, events = FrameParser(), []
    for i in range(0, len(data), 65536):
        events += parser.feed(data[i : i + 65536])
    assert len(events) == 1 and events[0].problem is None and events[0].value == big


def test_nesting_too_deep_for_the_parser_is_a_parse_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    events = FrameParser().feed(b"Content-Length: %d\r\n\r\n" % len(deep) + deep + frame(NEXT))
    assert isinstance(events[0], Refused) and events[0].code == PARSE_ERROR and events[1:] == [Message(NEXT)]


def test_the_end_of_the_input_judges_what_is_left() -> None:
    parser = FrameParser()
    assert parser.feed(b"Content-Length: 5\r\n") == []
    assert [type(e) for e in parser.close()] == [Dropped]
    parser = FrameParser()
    parser.feed(b'Content-Length: 500\r\n\r\n{"id": ')
    assert [type(e) for e in parser.close()] == [Refused]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=64))
def test_any_bytes_then_a_good_frame_the_good_frame_is_read(noise: bytes, chunk: int) -> None:
    """Whatever came before (after a line break, so it cannot be the start of the frame's own header line), the frame
    that follows is read, with its own message intact."""
    data = noise + b"\r\n" + frame(NEXT)
    parser, events = FrameParser(), []
    for i in range(0, len(data), chunk):
        events += parser.feed(data[i : i + chunk])
    events += parser.idle() + parser.close()
    assert values(events)[-1:] == [NEXT]
