"""waferline.cli — the `waferline` command (main.py) and its subcommands, one module each, named for it.

A tool, not product code: nothing in server/, engine/, hardware/ or training/ imports it. The benchmarks
(waferline.benchmarks) may import from here; nothing here imports a benchmark except the dispatcher, by name.
"""
