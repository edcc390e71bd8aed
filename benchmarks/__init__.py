"""waferline.benchmarks — the `waferline bench*` subcommands: each measures one path and prints figures.

Figures, never asserts (docs/benchmarks.md records them). A tool, not product code: nothing in server/, engine/,
hardware/ or training/ imports it. A benchmark may import waferline.cli (shared arguments, the scripted typist);
waferline.cli never imports a benchmark except the dispatcher, which loads each subcommand module by name.
"""
