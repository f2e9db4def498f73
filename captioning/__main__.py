"""`python -m captioning SUBCOMMAND --config CONFIG [options]`: a bare `--help` is answered before torch and Lightning load."""

import sys

from captioning.command import HELP

if __name__ == "__main__":
    if not HELP.answer(sys.argv[1:]):
        from captioning.cli import main

        main()
