"""The `agentrl` command line: `app` (the parser, `main`, error reporting), one module per
command (`train`, `eval`, `generate`, `plot`, `view`, `demo`, `envs`) and `args` (flags
generated from the config fields). `agentrl.cli:console_main` is the console entry point
(`main(argv)` returns the status, for calling the command from Python)."""

from agentrl.cli.app import build_parser, console_main, main

__all__ = ["build_parser", "console_main", "main"]
