"""`waferline demo` (behind `make demo`): watch a developer type with waferline's ghost text, then see what it cost.

It starts `waferline serve` as an editor does, opens a real source file (a copy of colorsys.py from the Python
standard library, or --file), and types a few functions key by key at a human pace through LSP. The terminal shows
the end of the file as it changes: typed text, the cursor, and the ghost text in grey as the server answers; a
suggestion that matches what the developer was about to type is accepted, as Tab would. Then it prints the latency
distribution (keystroke sent -> response received) and the server's statistics.
"""

from __future__ import annotations

import argparse
from typing import Any

from waferline.cli.typing_session import add_session_arguments

VIEW_LINES = 18  # lines of the file shown around the cursor
BUCKETS_MS = (5, 10, 20, 50, 100, 150, 250, 500, 1000)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_arguments(parser)


def render(session: Any, title: str) -> Any:
    """The end of the file around the cursor, with the ghost text in grey after it."""
    from rich.panel import Panel
    from rich.text import Text

    before, after = session.text[: session.cursor], session.text[session.cursor :]
    ghost = session.ghost
    view = Text()
    view.append(before)
    view.append(ghost, style="grey50 italic")
    view.append("▏", style="bold bright_cyan")
    view.append(after)
    lines = view.split("\n", allow_blank=True)
    cursor_line = before.count("\n") + ghost.count("\n")
    first = max(0, cursor_line - VIEW_LINES + 3)
    shown = Text()
    for n, line in enumerate(lines[first : first + VIEW_LINES], start=first + 1):
        shown.append(f"{n:5d} ", style="grey42")
        shown.append_text(line)
        shown.append("\n")
    done = [r for r in session.requests if r.latency_ms is not None]
    last = f"{done[-1].latency_ms:.0f} ms" if done else "—"
    status = (
        f"keystrokes {session.keystrokes} · requests {len(session.requests)} · last answer {last} · "
        f"accepted {session.accepted} ({session.accepted_chars} chars)"
    )
    return Panel(shown, title=title, subtitle=status, border_style="grey35")


def histogram(latencies: list[float]) -> Any:
    """Latency distribution as a table of buckets with bars."""
    from rich.table import Table

    table = Table(title="latency: keystroke sent → response received", show_edge=False)
    table.add_column("≤ ms", justify="right")
    table.add_column("requests", justify="right")
    table.add_column("", min_width=40)
    counts, lo = [], 0.0
    for hi in (*BUCKETS_MS, float("inf")):
        counts.append((hi, sum(1 for x in latencies if lo < x <= hi or (lo == 0 and x == 0))))
        lo = hi
    top = max((c for _, c in counts), default=1) or 1
    for hi, c in counts:
        label = "more" if hi == float("inf") else f"{hi:g}"
        table.add_row(label, str(c), "█" * round(40 * c / top))
    return table


def run(args: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console
    from rich.live import Live

    from waferline.cli.typing_session import SCRIPT, Session, check_session_args, print_table, summarize, type_script

    check_session_args(args)
    console = Console()
    title = f"waferline demo · {args.file or 'colorsys.py'} · typing at {args.cps:g} chars/s"
    with Live(console=console, refresh_per_second=20, transient=False) as live:

        def on_change(s: Session) -> None:
            live.update(render(s, title))

        session = asyncio.run(
            type_script(
                model=args.model, backend=args.backend, source=args.file, chars_per_s=args.cps,
                script=SCRIPT[: args.keys], on_change=on_change, log_file=args.log_file, options={"dtype": args.dtype},
            )
        )  # fmt: skip
        live.update(render(session, title))
    console.print()
    console.print(histogram([r.latency_ms for r in session.requests if r.latency_ms is not None]))
    print_table(summarize(session))
    return 0
