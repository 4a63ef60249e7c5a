"""`python -m agentrl.cli ...`: the `agentrl` command."""

from agentrl.cli.app import main

raise SystemExit(main())
