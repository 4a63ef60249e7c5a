"""The `agentrl` command line: `app` (the parser, `main`, error reporting), one module per
command (`train`, `eval`, `generate`, `plot`, `view`, `demo`, `envs`) and `args` (flags
generated from the config fields). `agentrl.cli:main` is the console entry point."""

from agentrl.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
