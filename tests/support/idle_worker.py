"""TEST DOUBLE of the server's engine worker (server/worker.py) as `InlineCompletions` uses it: never busy, no context
limit, nothing precomputed. Subclasses answer `complete` with the completion their test needs."""

from __future__ import annotations


class IdleWorker:
    async def precompute(self, request: object, **kw: object) -> None:
        return None

    def context_chars(self, max_new_tokens: int) -> int | None:
        return None

    def busy(self) -> bool:
        return False
