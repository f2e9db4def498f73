"""The LightningCLI both tasks build on: the project's checkpoint rules in every subcommand."""

from __future__ import annotations

import logging
import os
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import torch.distributed as dist
from jsonargparse import DefaultHelpFormatter, Namespace
from lightning.pytorch.callbacks import ModelSummary
from lightning.pytorch.callbacks.progress.progress_bar import ProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.warnings import PossibleUserWarning

from core.model.options import OptionError
from core.training.checkpoint_kinds import moved_class_message
from core.training.checkpoints import (
    CheckpointError,
    check_kind,
    check_weights_fit,
    read_checkpoint,
    with_safe_checkpoint_io,
)
from core.training.command_help import SUBCOMMANDS, WIDTH, CommandHelp
from core.training.precision import precision_for
from core.training.progress import CountedModelSummary, training_progress_bar
from core.training.resume import RUN_BEST, RandomState

#: The settings every task config shares (seed, logger, checkpoints, gradient clipping): each subcommand reads this
#: file first, then its --config files and options, which override it. It sits beside the task configs, found from
#: this package whatever the working directory.
TRAINER_BASE = Path(__file__).resolve().parents[2] / "configs" / "trainer.yaml"

#: Where the precision chosen for a null `trainer.precision` is passed to the other processes of a DDP run, which
#: Lightning starts by running the same command again: they use it instead of probing the CPU on their own.
CHOSEN_PRECISION = "VISUAL_ATTENTION_PRECISION"


class CheckpointSafeCLI(LightningCLI):
    """LightningCLI for the project's models, with its checkpoint rules in every subcommand:

    * every subcommand starts from `TRAINER_BASE` (configs/trainer.yaml), whose logger writes to the run folder,
      `trainer.default_root_dir`, unless its `save_dir` is given, then from the task's base (configs/TASK.yaml);
    * a `--ckpt_path` file is read as data and must be a checkpoint of the model's `checkpoint_kind`, whose weights fit
      the model its hyper-parameters build; otherwise a CheckpointError names the file, before anything runs (a
      `--ckpt_path` that is not a file at all is said in one line before a run folder is made, with where the config's
      fit keeps its best checkpoint: `<trainer.default_root_dir>/best.ckpt`, `core.training.resume.BestCheckpoint`);
    * the Trainer reads and writes checkpoints with `SafeCheckpointIO` (as data, atomically, never NaN weights)
      unless the config names a CheckpointIO plugin;
    * the `RandomState` callback is always added, so a run resumed mid-epoch continues exactly;
    * the progress bar is Lightning's own without `v_num`, and the model summary without a FLOPs count nothing
      counted (`core.training.progress`), unless the config names its own or turns them off; each subcommand says in one
      line what it is about to do;
    * with `choose_precision: true` (the Flickr8k configs), a `trainer.precision` left null becomes the precision
      that fits the machine (`core.training.precision`: bfloat16 autocast where it is faster than float32), said in one
      line; a precision given in a config or as `--trainer.precision` is used as given. Without it, a null
      precision is Lightning's float32, so a run does not depend on a timing.
    """

    command_help: CommandHelp  # what `--help` says: the task's description, subcommands and configs

    def __init__(
        self,
        *args: Any,
        trainer_defaults: dict[str, Any] | None = None,
        parser_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        defaults = dict(trainer_defaults or {})
        given = defaults.get("callbacks") or []
        defaults["callbacks"] = [*(given if isinstance(given, list) else [given]), RandomState()]
        self._checkpoint: tuple[str, dict[str, Any]] | None = None
        kwargs.setdefault("parser_class", RunFolderParser)
        parser_kwargs = with_trainer_base(parser_kwargs, self.subcommands(), self.command_help.task)
        parser_kwargs.update(
            prog=self.command_help.prog, description=textwrap.fill(self.command_help.description, WIDTH),
            epilog=self.command_help.epilog(), formatter_class=HelpFormatter,
        )  # fmt: skip
        super().__init__(*args, trainer_defaults=defaults, parser_kwargs=parser_kwargs, **kwargs)

    @classmethod
    def main(cls, model_class: type, datamodule_class: type, args: list[str] | None = None) -> CheckpointSafeCLI:
        """Run the command line (`args`, or the process's own): a CheckpointError or a model's OptionError ends it
        with its message (no traceback), and a distributed run leaves its process group closed.

        Lightning opens the process group of a DDP run but closes only NCCL ones at exit; a gloo group (CPU
        training) left open is torn down with the interpreter, where its threads can end the process with
        "terminate called without an active exception" and a failure exit status after a run that succeeded.
        """
        problem = cls.command_help.overlay_without_its_base(args if args is not None else sys.argv[1:])
        if problem:
            raise SystemExit(f"error: {problem}")
        show_progress_messages(model_class, datamodule_class)
        hide_library_notices()
        try:
            return cls(model_class, datamodule_class, save_config_kwargs={"overwrite": True}, args=args)
        except CheckpointError as error:
            raise SystemExit(f"error: {error}") from None
        except OptionError as error:
            hint = "a model option: change it in the config or on the command line"
            raise SystemExit(f"error: {error} ({hint})") from None
        finally:
            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()

    def _add_subcommands(self, parser: LightningArgumentParser, **kwargs: Any) -> None:
        # Lightning's own, with each subcommand's help said whole (`core.training.command_help.SUBCOMMANDS`) instead of
        # the first line of the Trainer method's docstring
        self._subcommand_parsers: dict[str, LightningArgumentParser] = {}
        subcommands = parser.add_subcommands()
        for subcommand in self.subcommands():
            options = {"description": SUBCOMMANDS[subcommand], **kwargs.get(subcommand, {})}
            self._subcommand_parsers[subcommand] = self._prepare_subcommand_parser(self.trainer_class, subcommand, **options)
            subcommands.add_subcommand(subcommand, self._subcommand_parsers[subcommand], help=SUBCOMMANDS[subcommand])

    def _parse_ckpt_path(self) -> None:
        # LightningCLI's own version reads the file's hyper-parameters into the config; this one checks the file
        # first, so a bad one is reported by name instead of failing inside torch or the argument parser, and
        # reads it through `read_checkpoint`, which brings an older checkpoint's classes and options up to date
        subcommand = self.config.get("subcommand")
        path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not path or path in LIGHTNING_CKPT_NAMES or str(path).startswith("registry"):
            return
        if not Path(path).is_file():  # said before any folder is made or anything is loaded
            raise CheckpointError(missing_checkpoint_message(path, self.config[subcommand].get("trainer")))
        checkpoint = read_checkpoint(path)
        check_kind(checkpoint, path, self.model_class.checkpoint_kind)
        self._checkpoint = (path, checkpoint)
        hparams = dict(checkpoint.get("hyper_parameters") or {})
        hparams.pop("_instantiator", None)
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        if hparams:
            self.config = self.parser.parse_object({subcommand: {"model": hparams}}, self.config)

    def parse_arguments(self, parser: LightningArgumentParser, args: Any) -> None:
        try:
            super().parse_arguments(parser, args)
        except (AttributeError, ImportError) as error:
            moved = moved_class_message(str(error))
            if moved is None:
                raise
            raise SystemExit(moved) from None

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        super().add_default_arguments_to_parser(parser)
        parser.add_argument(
            "--choose_precision",
            type=bool,
            default=False,
            help="when trainer.precision is not given, use bfloat16 autocast if this machine multiplies in it faster "
            "than in float32 (a short probe, logged), float32 otherwise",
        )

    def before_instantiate_classes(self) -> None:
        super().before_instantiate_classes()
        trainer = self._get(self.config, "trainer")
        chosen_here = self._get(self.config, "choose_precision", default=False)
        if chosen_here and isinstance(trainer, Namespace) and trainer.get("precision") is None:
            trainer.precision = self._machine_precision(trainer.get("accelerator") or "auto")

    @staticmethod
    def _machine_precision(accelerator: Any) -> str:
        """The precision `core.training.precision` chooses for this machine, logged once; in the other processes of a DDP
        run, the one the first process chose."""
        inherited = os.environ.get(CHOSEN_PRECISION)
        if inherited and os.environ.get("LOCAL_RANK", "0") != "0":
            return inherited
        choice = precision_for(accelerator)
        logging.getLogger(__name__).info(
            "precision: %s, chosen for this machine (%s); --trainer.precision sets it", choice.precision, choice.reason
        )
        os.environ[CHOSEN_PRECISION] = choice.precision
        return choice.precision

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self._checkpoint is not None:
            path, checkpoint = self._checkpoint
            self._checkpoint = None
            check_weights_fit(self.model, checkpoint, path)

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        trainer = self._get(self.config_init, "trainer", default={})
        kwargs["plugins"] = with_safe_checkpoint_io(kwargs.get("plugins", trainer.get("plugins")))
        callbacks = kwargs.get("callbacks", trainer.get("callbacks")) or []
        callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
        if trainer.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in callbacks):
            callbacks = [*callbacks, training_progress_bar()]
        if trainer.get("enable_model_summary") is not False and not any(isinstance(c, ModelSummary) for c in callbacks):
            callbacks = [*callbacks, CountedModelSummary()]
        kwargs["callbacks"] = callbacks
        if self.subcommand != "fit":
            # scoring a checkpoint from another run folder (as the README does) restores nothing of its checkpoint
            # callback's bookkeeping, which only a fit would continue: Lightning's note that it will not is noise
            warnings.filterwarnings(
                "ignore", message="The dirpath has changed from", module=r"lightning\.pytorch\.callbacks\.model_checkpoint"
            )
        built = super().instantiate_trainer(**kwargs)
        self._say_what_it_does(built)
        return built

    def _what_it_does(self, subcommand: str, trainer: Any) -> str:
        model = type(self.model).__name__
        if subcommand == "fit":
            epochs = trainer.max_epochs
            length = f"for {epochs} epoch{'s' * (epochs != 1)}" if epochs and epochs > 0 else "until stopped"
            return f"fit: training {model} on {self._data_name('train')} {length}"
        if subcommand == "predict":
            return f"predict: {model} on {getattr(self.datamodule, 'predict_path', None) or self._data_name('predict')}"
        return f"{subcommand}: scoring {model} on {self._data_name('test' if subcommand == 'test' else 'val')}"

    def _data_name(self, stage: str) -> str:
        """The data a stage runs on, as the data module names it: "<dataset>/<split>"."""
        dataset = getattr(getattr(self.datamodule, "dataset", None), "name", None) or type(self.datamodule).__name__
        split = stage if stage == "train" else getattr(self.datamodule, "split_names", {}).get(stage, stage)
        return f"{dataset}/{split}"

    def _say_what_it_does(self, trainer: Any) -> None:
        """Log what the subcommand is about to do, from which checkpoint, and where its files go (rank 0 only)."""
        subcommand = self.config.get("subcommand")
        if not subcommand or trainer.global_rank != 0:
            return
        ckpt_path = self.config[subcommand].get("ckpt_path")
        folder = getattr(trainer.logger, "log_dir", None) or trainer.default_root_dir
        logging.getLogger(__name__).info(
            "%s%s; logs%s in %s", self._what_it_does(subcommand, trainer), f", from {ckpt_path}" if ckpt_path else "",
            " and checkpoints" if subcommand == "fit" else "", folder,
        )


#: What `--ckpt_path` may name besides a file: Lightning finds these checkpoints itself ("registry" and
#: "registry:NAME" too, handled apart).
LIGHTNING_CKPT_NAMES = frozenset({"best", "last", "hpc"})


def missing_checkpoint_message(path: str, trainer: Namespace | None) -> str:
    """What a user whose `--ckpt_path` is not a file is told: the path, and where the config's run folder keeps the
    best checkpoint of its fit (`core.training.resume.RUN_BEST`), with whether it is there yet."""
    folder = trainer.get("default_root_dir") if isinstance(trainer, Namespace) else None
    message = f"--ckpt_path {path}: no such checkpoint file"
    if not folder:
        return message
    best = Path(folder) / RUN_BEST
    if best.is_file():
        return f"{message}; this config's last fit kept its best checkpoint as {best}"
    return f"{message}; a fit with this config keeps its best checkpoint as {best} (none there yet)"


class HelpFormatter(DefaultHelpFormatter):
    """jsonargparse's help, with the description and the epilog (the list of configs) kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


def with_trainer_base(parser_kwargs: dict[str, Any] | None, subcommands: Any, task: str) -> dict[str, Any]:
    """`parser_kwargs` with `TRAINER_BASE` and then the task's own base (configs/TASK.yaml: what all its configs
    share) as the default config files of each subcommand that names none."""
    bases = [TRAINER_BASE, TRAINER_BASE.with_name(f"{task}.yaml")]
    for base in bases:
        if not base.is_file():  # without it, runs would quietly lose their logger and checkpoint settings
            raise FileNotFoundError(
                f"{base}: the settings the task configs build on are missing; the CLIs run from a checkout of the "
                "repository (pip install -e .)"
            )
    kwargs = dict(parser_kwargs or {})
    for subcommand in subcommands:
        kwargs[subcommand] = {"default_config_files": [str(base) for base in bases], **kwargs.get(subcommand, {})}
    return kwargs


class RunFolderParser(LightningArgumentParser):
    """The CLI's parser: a logger's `save_dir` left null (configs/trainer.yaml's) becomes the run folder,
    `trainer.default_root_dir`, once every config file and option is merged: before the config is checked (a
    CSVLogger requires one) or printed (`--print_config` shows the folder). A config thus names its run folder once."""

    def error(self, message: str, *args: Any, **kwargs: Any) -> Any:
        # a class named by a path that moved is said in one line with its new path, not with the usage
        moved = moved_class_message(message)
        if moved is not None:
            raise SystemExit(moved)
        return super().error(message, *args, **kwargs)

    def validate(self, cfg: Namespace, *args: Any, **kwargs: Any) -> None:
        log_to_run_folder(cfg)
        super().validate(cfg, *args, **kwargs)

    def dump(self, cfg: Namespace, *args: Any, **kwargs: Any) -> str:
        cfg = cfg.clone()
        log_to_run_folder(cfg)
        return super().dump(cfg, *args, **kwargs)


def log_to_run_folder(config: Namespace) -> None:
    """Each logger of `config` (a subcommand's, or the whole CLI's) with a null `save_dir` writes to
    `trainer.default_root_dir` (the working directory when that is not set either)."""
    subcommand = config.get("subcommand")
    if isinstance(subcommand, str) and isinstance(config.get(subcommand), Namespace):
        config = config[subcommand]
    trainer = config.get("trainer")
    if not isinstance(trainer, Namespace):
        return
    loggers = trainer.get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        init_args = logger.get("init_args") if isinstance(logger, Namespace) else None
        if isinstance(init_args, Namespace) and "save_dir" in init_args and init_args.save_dir is None:
            init_args.save_dir = trainer.get("default_root_dir") or "."


def hide_library_notices() -> None:
    """Keep the libraries' notices that say nothing about the user's run off the console, each by its exact
    message (every other warning still shows):

    * Lightning's count of modules in eval mode at the start of training: a frozen encoder is in eval mode on
      purpose (`core.model.encoder`), so a run always had it;
    * torch's deprecation of `LeafSpec`, raised inside Lightning's own `_pytree` helper at every evaluation: for
      Lightning to change, not the user;
    * Lightning's advertisement for its cloud logger (a "Tip" logged at every start), and its note that the
      trainer has a model summary already (the project's, `core.training.progress.CountedModelSummary`).
    """
    warnings.filterwarnings(
        "ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training", category=PossibleUserWarning
    )
    warnings.filterwarnings(
        "ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _LightningNotices) for f in rank_zero.filters):
        rank_zero.addFilter(_LightningNotices())


class _LightningNotices(logging.Filter):
    """Drops Lightning's "💡 Tip: ... litlogger" message, and its note that the trainer already has a model summary
    callback (the project's own, `core.training.progress.CountedModelSummary`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        tip = message.startswith("💡 Tip: For seamless cloud logging") and "litlogger" in message
        return not (tip or message.startswith("Trainer already configured with model summary callbacks"))


def show_progress_messages(*task_classes: type) -> None:
    """Let the project's INFO messages (feature cache hits and builds) reach the console: those of the layers below
    the tasks (core, data) and of the task whose classes (its model and data module) are given."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    tasks = dict.fromkeys(cls.__module__.partition(".")[0] for cls in task_classes)  # "captioning", in order, once
    for name in ("core", "data", *tasks):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        if not logger.handlers:
            logger.addHandler(handler)


