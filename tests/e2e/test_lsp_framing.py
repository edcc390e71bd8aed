"""Bad frames over a real process's stdio: each costs at most its own message, and the server keeps serving. (The
parser's every case, byte by byte, is in tests/server/test_framing.py; this is the same through the real pipes.)"""

from __future__ import annotations

import pytest
from raw_support import body, frame, raw_session, request

BAD = request("bad")  # a waferline/stats request in the bad frame: recovered, it is answered with a result
PROBE = request("probe")  # the good frame after it
N = len(body(BAD))


def header(line: bytes) -> bytes:
    return line + b"\r\n\r\n" + body(BAD)


CASES = {
    "too short": frame(BAD, length=10),
    "too long, swallowing the next header": frame(BAD, length=N + 25),
    "zero": frame(BAD, length=0),
    "negative": frame(BAD, length=-5),
    "not a number": frame(BAD, length="abc"),
    "absurd": frame(BAD, length=99999999999999),
    "past a 64-bit integer": frame(BAD, length=9223372036854775808),
    "lowercase header name": header(b"content-length: %d" % N),
    "LF-only header lines": b"Content-Length: %d\n\n" % N + body(BAD),
    "with a Content-Type": header(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d" % N),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_frame_is_read_when_it_can_be_and_the_next_one_answered(case: str) -> None:
    with raw_session() as server:
        server.write(CASES[case] + frame(PROBE))
        answers = server.answers_until("probe")
        assert [a["id"] for a in answers] == ["bad", "probe"], answers
        assert all("result" in a for a in answers)
        rest, code = server.finish()
        assert code == 0 and [a["id"] for a in rest] == ["bye"]
        assert "Traceback" not in server.stderr and " ERROR " not in server.stderr


@pytest.mark.parametrize("length", [N + 100, 99999999999999])
def test_a_too_long_last_frame_is_answered_after_a_pause(length: int) -> None:
    """Nothing follows the frame, so its declared length never arrives: after a short pause the body is read."""
    with raw_session() as server:
        server.write(frame(BAD, length=length))
        assert server.answer()["id"] == "bad"
        server.send(PROBE)
        assert server.answer()["id"] == "probe"
        assert server.finish()[1] == 0


@pytest.mark.parametrize(
    "junk", [b"garbage between frames\r\n", b"\x00\xff" * 40, b'{"jsonrpc": "2.0", "id": "headerless"}']
)
def test_garbage_between_frames_is_dropped(junk: bytes) -> None:
    with raw_session() as server:
        server.write(junk + frame(PROBE))
        assert [a["id"] for a in server.answers_until("probe")] == ["probe"]
        assert server.finish()[1] == 0
        assert "bad frame" in server.stderr


def test_a_body_that_is_not_json_is_a_parse_error_with_id_null() -> None:
    with raw_session() as server:
        server.write(b'Content-Length: 14\r\n\r\n{"id": 1, oops' + frame(PROBE))
        first, second = server.answer(), server.answer()
        assert first["id"] is None and first["error"]["code"] == -32700
        assert second["id"] == "probe" and "result" in second
        assert server.finish()[1] == 0
