"""The engine's state as the user sees it: ready, answered by the local model in a remote engine's place, or not
answering — for inline completions and for chat-style work apart (engine/routing.py).

The worker (server/worker.py) tells `EngineHealth` how each request went: the engine could not answer
(`EngineUnavailable`), the local fallback answered in its place (`Completion.unavailable`), or it answered. A change
of state — the first failure of an outage, the first answer after one — is passed to `on_change` once, on the event
loop: the server shows the first as one `window/showMessage`, logs the second, and sends both to the clients as a
`waferline/engineState` notification, which their status bar and statusline show. A remote engine that fails for
every keystroke of an outage is reported once, not once a keystroke.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ROUTES = ("completion", "chat")
ENGINE_STATE_METHOD = "waferline/engineState"


@dataclass(frozen=True)
class Problem:
    reason: str  # why the configured engine does not answer, naming the server
    answered_locally: bool  # the local model answers in its place (engineFallback)


Change = Callable[[str, Problem | None], None]  # (route, the new problem or None when it answers again)


class EngineHealth:
    def __init__(self) -> None:
        self.problems: dict[str, Problem] = {}
        self.on_change: Change | None = None

    def reset(self, problems: dict[str, tuple[str, bool]] | None = None) -> None:
        """A new engine: no problem, or those it was built with (a remote engine down at start: why, and whether
        the local model answers in its place, engine/api.py `EngineInfo.problems`), which the load reported."""
        self.problems = {part: Problem(why, local) for part, (why, local) in (problems or {}).items()}

    def failed(self, route: str, reason: str, *, answered_locally: bool) -> None:
        problem = Problem(reason, answered_locally)
        before = self.problems.get(route)
        self.problems[route] = problem
        if before is None or before.answered_locally != answered_locally:
            self._changed(route, problem)

    def answered(self, route: str) -> None:
        if self.problems.pop(route, None) is not None:
            self._changed(route, None)

    def _changed(self, route: str, problem: Problem | None) -> None:
        if self.on_change is not None:
            self.on_change(route, problem)

    def state(self) -> str:
        """ "ready", "degraded" (a remote engine down, the local model answering), or "down" (nothing answers)."""
        if not self.problems:
            return "ready"
        return "degraded" if all(p.answered_locally for p in self.problems.values()) else "down"

    def snapshot(self) -> dict[str, Any]:
        problems = {route: p.reason for route, p in self.problems.items()}
        return {"state": self.state(), "problems": problems}


def outage_message(route: str, problem: Problem) -> str:
    """What the user is told once when an engine stops answering: which one, why, and what happens meanwhile."""
    what = "inline completions" if route == "completion" else "chat-style work (hover summaries, ask, code actions)"
    meanwhile = "the local model answers until it is back" if problem.answered_locally else "none until it is back"
    return f"the remote engine for {what} is not answering ({problem.reason}); {meanwhile}"
