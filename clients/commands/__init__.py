"""The `seed-agents` subcommands, one module per theme; each exposes `register(subparsers, common)`."""
