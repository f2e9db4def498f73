"""`python -m vqa SUBCOMMAND --config CONFIG [options]`: a bare `--help` is answered before torch and Lightning load."""

import sys

from vqa.command import HELP

if __name__ == "__main__":
    if not HELP.answer(sys.argv[1:]):
        from vqa.cli import main

        main()
