"""What a task's command line says about itself: its description, its subcommands in whole sentences, and the
configs it ships, for `python -m captioning --help` and `python -m vqa --help`.

The same `CommandHelp` feeds both the LightningCLI parser (`core.training.cli.CheckpointSafeCLI`: description, epilog,
subcommand help) and a quick answer to a bare `--help`, given before torch and Lightning are imported (seconds
on a laptop), since that answer needs neither. This module imports neither, for that reason.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: The configs of every task, beside the packages (a checkout installed with `pip install -e .`).
CONFIGS = Path(__file__).resolve().parents[2] / "configs"

#: Lightning's subcommands, each said whole (Lightning's own help is the first line of each Trainer method's
#: docstring, cut mid-sentence).
SUBCOMMANDS = {
    "fit": "train a model, validating it after every epoch; logs and checkpoints go to the run folder "
    "(--trainer.default_root_dir)",
    "validate": "score a checkpoint (--ckpt_path) on the validation split",
    "test": "score a checkpoint (--ckpt_path) on the test split",
    "predict": "run a checkpoint (--ckpt_path) on the data module's predict set and write its results",
}

HELP_FLAGS = frozenset({"-h", "--help"})
WIDTH = 100


@dataclass(frozen=True)
class CommandHelp:
    """A task's command line, in words.

    Args:
        prog: how it is run ("python -m captioning").
        description: what it does, one paragraph.
        task: the folder of its configs under configs/ ("captioning").
        overlays: {overlay config: the configs given before it, in order}, by file name in that folder. An overlay
            holds only what differs from the configs before it, and the command line refuses it without them. Each
            config's header comment shows the command that gives it; a test checks the two agree.
    """

    prog: str
    description: str
    task: str
    overlays: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def configs(self) -> dict[str, str]:
        """{config path as a user types it: what it trains}, from each config's first comment line, in name order."""
        folder = CONFIGS / self.task
        return {
            f"configs/{self.task}/{path.name}": summary(path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("*.yaml"))
        }

    def epilog(self) -> str:
        """The configs, each with the configs it is given after, and how to read every option, for the end of
        `--help`."""
        lines = [f"configs (a base: {self.prog} fit --config CONFIG; an overlay after the configs it names, in order):"]
        for path, what in self.configs().items():
            before = self.overlays.get(Path(path).name, ())
            what += f" [after {', '.join(before)}]" if before else ""
            lines += textwrap.wrap(what, WIDTH, initial_indent=f"  {path}: ", subsequent_indent="      ")
        lines += ["", f"every option of a subcommand and config: {self.prog} SUBCOMMAND --config CONFIG --help"]
        return "\n".join(lines)

    def config_chain(self, path: Path) -> list[Path]:
        """The configs given before the config at `path` (`overlays`), then itself: each --config reads over the
        ones before it. A config outside this task's folder has none before it."""
        folder = CONFIGS / self.task
        if Path(path).resolve().parent != folder:
            return [Path(path)]
        return [*(folder / name for name in self.overlays.get(Path(path).name, ())), Path(path)]

    def overlay_without_its_base(self, argv: Sequence[str]) -> str | None:
        """What is wrong when a command line gives an overlay config without the configs it is given after
        (`flickr8k_hard.yaml` alone: it holds only what differs from `flickr8k_soft.yaml`); None when nothing is."""
        given = [path.resolve() for path in given_configs(argv) if path.is_file()]
        for position, config in enumerate(given):
            chain = self.config_chain(config)
            missing = [base for base in chain[:-1] if base.resolve() not in given[:position]]
            if missing:
                command = " ".join(f"--config {path.relative_to(CONFIGS.parent)}" for path in chain)
                return (
                    f"{config.name} is an overlay: give it after {', '.join(base.name for base in missing)}, "
                    f"in the order its first lines say ({command})"
                )
        return None

    def text(self) -> str:
        """The whole answer to a bare `--help`."""
        width = max(map(len, SUBCOMMANDS)) + 2
        subcommands = [
            line
            for name, what in SUBCOMMANDS.items()
            for line in textwrap.wrap(what, WIDTH, initial_indent=f"  {name:<{width}}", subsequent_indent=" " * (width + 2))
        ]
        return "\n".join([
            f"usage: {self.prog} [-h] [-c CONFIG] {{{','.join(SUBCOMMANDS)}}} ...",
            "",
            textwrap.fill(self.description, WIDTH),
            "",
            "subcommands:",
            *subcommands,
            "",
            self.epilog(),
        ])  # fmt: skip

    def answer(self, argv: Sequence[str]) -> bool:
        """Print `text()` and return True when `argv` asks only for the top-level help; otherwise leave the
        command line to the full parser."""
        if len(argv) != 1 or argv[0] not in HELP_FLAGS:
            return False
        try:
            print(self.text(), flush=True)
        except BrokenPipeError:  # the reader stopped early (`--help | head`): nothing more to say, and no traceback
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return True


def given_configs(argv: Sequence[str]) -> list[Path]:
    """The config files a command line gives (`--config F`, `--config=F`, `-c F`), in order."""
    configs = []
    for option, value in zip(argv, [*argv[1:], ""]):
        if option in ("--config", "-c") and value:
            configs.append(Path(value))
        elif option.startswith("--config="):
            configs.append(Path(option.partition("=")[2]))
    return configs


def summary(config: str) -> str:
    """The first sentence of a config's leading comment, without its parenthesised asides."""
    comments = []
    for line in config.splitlines():
        if not line.startswith("#"):
            break
        comments.append(line.lstrip("#").strip())
    text = re.sub(r"\s*\([^)]*\)", "", " ".join(comments))
    return re.split(r"\.(?:\s|$)", text, maxsplit=1)[0]
