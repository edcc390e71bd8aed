"""LSP's base protocol, read: bytes from the client in, JSON values out, one per frame, surviving bad frames.

A frame is header lines (`Name: value`, each ended by CRLF or a bare LF, names in any case), an empty line, and a
body of `Content-Length` bytes; every header but Content-Length is ignored. `FrameParser` is fed bytes as they
arrive and returns what they complete (`Message`, `Refused`, `Dropped`). A good frame costs one `json.loads` of its
body. A bad one costs at most its own message:

- when the body of the declared length is not JSON (the length is too short, too long, zero, negative, not a
  number, over `MAX_BODY`, or missing), the body is taken to run up to the next valid `Content-Length` header line
  instead, and read from there if it parses (such a line can never occur inside a JSON body: a raw line break is
  allowed only between tokens, and the header's letters are not JSON); a body that is not JSON either way is
  `Refused` (the transport answers ParseError, id null, as JSON-RPC asks), and reading resumes at that header;
- when the declared length has not arrived and no header follows, the bytes may still be on their way: after an
  idle pause (`idle`, called by the transport) they are read if they already are a whole JSON object or array (a
  part of one never is), else kept until more bytes, the next header or the end of input decide;
- bytes between frames that are not a frame (garbage, a body without headers) are `Dropped` up to the next valid
  `Content-Length` header; a frame whose body grows past `MAX_BODY` is refused and skipped the same way.

Memory is bounded: the declared length is never allocated, only the bytes that arrived are held, and never more
than `MAX_BODY` (plus one chunk) of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_BODY = 64 * 1024 * 1024  # bytes; a 5 MB document JSON-escaped (up to 6 bytes a character) fits many times over
MAX_HEADER = 8 * 1024  # bytes of header lines before the empty line; more is not a header
PARSE_ERROR, INVALID_REQUEST = -32700, -32600

# A Content-Length header line another frame can be resynchronised on: a number and the line's end (which no JSON
# body can hold). Twelve digits are more than MAX_BODY needs, and keep int() away from huge numbers.
_NEXT_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*\d{1,12}[ \t]*\r?\n", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+)[ \t]*:[ \t]*(.*?)[ \t]*")
_SPACE = re.compile(rb"[ \t\r\n]*")
_KEEP = 64  # bytes kept of skipped input: a header that starts at its end is still found when the rest arrives
_WHITESPACE = b" \t\r\n"
_NOT_JSON = object()


@dataclass(frozen=True)
class Message:
    """A frame's body, as `json.loads` read it; `problem` says what was wrong with a frame it was recovered from."""

    value: Any
    problem: str | None = None


@dataclass(frozen=True)
class Refused:
    """A frame whose body cannot be read: answered with `code` and id null, since no id can be read from it."""

    code: int
    reason: str


@dataclass(frozen=True)
class Dropped:
    """Bytes that held no message (garbage between frames, an empty body): logged, never answered."""

    reason: str


Event = Message | Refused | Dropped


class FrameParser:
    """Feed it bytes (`feed`), tell it when the input paused (`idle`) or ended (`close`); each returns the events the
    bytes so far complete, in order."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self.max_body = max_body
        self._buf = bytearray()
        self._body: int | None = None  # where the current frame's body starts in _buf, once its headers are read
        self._length: int | None = None  # its Content-Length; None when missing, unreadable or absurd
        self._problem: str | None = None  # what was wrong with its headers
        self._scanned = 0  # how far into _buf the body has been searched for the next header
        self._skip_reason: str | None = None  # why bytes are being dropped up to the next header, while they are
        self._skipped = 0  # how many so far

    @property
    def pending(self) -> bool:
        """A frame's headers are read and its body is not complete: the transport calls `idle` after a pause."""
        return self._body is not None

    def feed(self, data: bytes) -> list[Event]:
        self._buf += data
        return self._drain(idle=False, final=False)

    def idle(self) -> list[Event]:
        """The input paused: read a pending body that is already whole although its declared length is not."""
        return self._drain(idle=True, final=False)

    def close(self) -> list[Event]:
        """The input ended: judge what is left."""
        events = self._drain(idle=True, final=True)
        if self._buf.strip(_WHITESPACE):
            self._skip_reason = self._skip_reason or "bytes at the end of the input that are not a frame"
        if self._skip_reason is not None:
            self._skipped += len(self._buf)
            events.append(self._end_skip())
        self._buf.clear()
        return events

    def _drain(self, *, idle: bool, final: bool) -> list[Event]:
        events: list[Event] = []
        while True:
            if self._skip_reason is not None:
                if not self._skip_to_header():
                    break
                events.append(self._end_skip())
            elif self._body is None:
                if not self._read_headers():
                    break
            elif not self._read_body(events, idle=idle, final=final):
                break
        return events

    # -- between frames: the headers -------------------------------------------------------------------------------
    def _read_headers(self) -> bool:
        """Read one frame's header lines (or start skipping what is not a frame); False while more bytes are needed."""
        buf = self._buf
        if (space := _SPACE.match(buf)) is not None:
            del buf[: space.end()]  # line breaks between frames are harmless
        if not buf:
            return False
        first_end = buf.find(b"\n")
        if first_end < 0:
            return self._too_long(len(buf))
        found = _NEXT_HEADER.search(buf, 0, first_end + 1)
        if found is not None and found.start() > 0:  # garbage, then a header on the same line
            self._skip_reason = "bytes between frames that are not a frame"
            return True
        pos, length, problem, headers = 0, None, None, 0
        while True:
            end = buf.find(b"\n", pos)
            if end < 0:
                return self._too_long(len(buf))
            line = bytes(buf[pos:end]).rstrip(b"\r")
            if not line:
                pos = end + 1
                break
            header = _HEADER_LINE.fullmatch(line)
            if header is None:
                if not headers:  # not a frame at all: skip to the next one
                    self._skip_reason = "bytes between frames that are not a frame"
                    return True
                problem = problem or "no empty line after the headers"  # this line starts the body
                break
            headers += 1
            if header[1].lower() == b"content-length" and length is None and problem is None:
                length, problem = _content_length(header[2], self.max_body)
            pos = end + 1
            if pos > MAX_HEADER:
                return self._too_long(pos)
        if length is None and problem is None:
            problem = "no Content-Length header"
        self._body, self._length, self._problem, self._scanned = pos, length, problem, pos
        return True

    def _too_long(self, size: int) -> bool:
        if size <= MAX_HEADER:
            return False  # a header still arriving
        self._skip_reason = f"more than {MAX_HEADER} bytes where header lines were expected"
        return True

    # -- in a body -------------------------------------------------------------------------------------------------
    def _read_body(self, events: list[Event], *, idle: bool, final: bool) -> bool:
        """Read the current frame's body, if the bytes so far decide it; False while more bytes are needed."""
        buf, start, length = self._buf, self._body, self._length
        assert start is not None, "a body is read once its headers are"
        available = len(buf) - start
        if length is not None and available >= length:
            value = _json(buf[start : start + length])
            if value is not _NOT_JSON:  # the usual case: a good frame
                events.append(Message(value, self._problem))
                self._take(start + length)
                return True
        # The declared length is not the body, or has not all arrived: look for the next frame's header.
        found = _NEXT_HEADER.search(buf, max(start, self._scanned - _KEEP))
        if found is not None:
            events.append(self._judge(buf[start : found.start()], "the body was cut at the next header"))
            self._take(found.start())
            return True
        self._scanned = len(buf)
        complete = length is not None and available >= length
        if complete or idle or final:
            if _ends_like_json(buf, start) and (value := _json(buf[start:])) is not _NOT_JSON:
                events.append(Message(value, self._describe("the body was read up to the end of what arrived")))
                self._take(len(buf))
                return True
            if (complete and idle) or final:
                events.append(self._judge(buf[start:], "nothing followed the body"))
                self._take(len(buf))
                return True
        if available > self.max_body:
            events.append(Refused(INVALID_REQUEST, f"a message over {self.max_body} bytes was dropped"))
            self._take(len(buf))
            self._skip_reason = f"the rest of a message over {self.max_body} bytes"
            return True
        return False

    def _judge(self, body: bytearray, how: str) -> Event:
        if not body.strip(_WHITESPACE):
            return Dropped(self._describe(f"{how}, and it was empty"))
        value = _json(body)
        if value is _NOT_JSON:
            return Refused(PARSE_ERROR, self._describe(f"{how}, and it is not JSON"))
        return Message(value, self._describe(how))

    def _describe(self, how: str) -> str:
        return f"{self._problem or f'Content-Length {self._length} was wrong'}; {how}"

    def _take(self, end: int) -> None:
        """Consume the current frame: `end` bytes of the buffer. The next frame's headers come next."""
        del self._buf[:end]
        self._body, self._length, self._problem, self._scanned = None, None, None, 0

    # -- skipping to the next header -------------------------------------------------------------------------------
    def _skip_to_header(self) -> bool:
        """Drop bytes up to the next valid Content-Length header; True once it is found (it starts the buffer)."""
        found = _NEXT_HEADER.search(self._buf)
        dropped = found.start() if found is not None else max(0, len(self._buf) - _KEEP)
        del self._buf[:dropped]
        self._skipped += dropped
        return found is not None

    def _end_skip(self) -> Dropped:
        event = Dropped(f"{self._skipped} bytes dropped: {self._skip_reason}")
        self._skip_reason, self._skipped = None, 0
        return event


def _content_length(value: bytes, max_body: int) -> tuple[int | None, str | None]:
    """The declared length, or None and why it cannot be used."""
    text = value.decode("ascii", "replace")
    if not text.isdigit() or not text.isascii():
        return None, f"Content-Length {text[:24]!r} is not a number of bytes"
    if len(text) > 12 or int(text) > max_body:
        return None, f"Content-Length {text[:24]} is over the limit of {max_body} bytes"
    if int(text) == 0:
        return None, "Content-Length is 0"
    return int(text), None


def _json(body: bytes | bytearray) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested too deeply for the parser
        return _NOT_JSON


def _ends_like_json(buf: bytearray, start: int) -> bool:
    """Whether the bytes from `start` end as a JSON object or array does (a cheap test before parsing them)."""
    end = len(buf) - 1
    while end >= start and buf[end] in _WHITESPACE:
        end -= 1
    return end >= start and buf[end] in b"}]"
