"""`python -m agentrl.cli ...`: the `agentrl` command."""

from agentrl.cli.app import console_main

console_main()
