"""`completion bash|zsh`: the shell code that completes `seed-agents` commands and flags.

argcomplete does the work: the shell calls `seed-agents` back with the line being typed
(`_ARGCOMPLETE` set), and `seed_agents.clients.cli.main` answers from the same argparse parser as always,
so every command and flag completes, those added later included.
"""
from __future__ import annotations

SHELLS = ("bash", "zsh")


def completion(args) -> int:
    import argcomplete

    print(argcomplete.shellcode(["seed-agents"], shell=args.shell), end="")
    return 0


def register(sub, common) -> None:
    p = sub.add_parser("completion", help="print shell completion code (bash, zsh)",
                       description="Print the code that makes bash or zsh complete seed-agents "
                                   "commands and flags. Add to ~/.bashrc: "
                                   'eval "$(seed-agents completion bash)"; to ~/.zshrc: '
                                   'eval "$(seed-agents completion zsh)".')
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")
    p.set_defaults(run=completion)


def autocomplete(parser) -> None:
    """Answer the shell's completion request and exit, when this run is one (else nothing)."""
    import os

    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(parser)
