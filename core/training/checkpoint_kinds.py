"""What each task tells the shared core about its checkpoints, without the core naming or importing any task.

A task declares one `CheckpointKind` through an entry point (pyproject.toml). The kind says what its checkpoints are
called and hold. It also says how the task's older checkpoints map onto today's classes (its `CheckpointHistory`),
and which of their settings may differ between checkpoints of one model (read by `core.training.averaging`).
`core.training.checkpoints.read_checkpoint` applies the history to every checkpoint it reads, through
`current_hyperparameters`. So a checkpoint saved before a class moved or an option was renamed still loads, the
bundled ones included, which are never saved again.

This module imports neither torch nor Lightning, so a task's declaration is cheap to load.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import Any

# The entry-point group (pyproject.toml) where each task declares its `CheckpointKind`.
KIND_ENTRY_POINTS = "visual_attention.checkpoint_kinds"


@dataclass(frozen=True)
class CheckpointHistory:
    """What changed since a task's older checkpoints were saved, as tables: a change that would break them adds an
    entry, and `current` reads them as today's classes take them.

    Args:
        moved_modules: {old module path: current one}: modules whose classes moved. A checkpoint records its
            classes' import paths in its hyper-parameters ("captioning.encoder.EfficientNetLite"); checkpoints of
            every kind are read with every history's moves (`current_hyperparameters`).
        flat_components: {key: (class path, options)}: parts that became components, chosen in YAML by class
            (`model.decoder`), whose options older checkpoints hold at the top level of their hyper-parameters;
            their weights already sit under `key.`.
        renamed_options: {class path: {old option name: current one}}: options a class renamed, wherever a config of
            that class stands in the hyper-parameters.
        removed_options: {class path: {option: the value the class now always uses}}: options a class no longer
            takes (they moved to a subclass). Older checkpoints record them at that value, and there they are dropped;
            an option saved at another value is kept, so that building the class refuses it by name.
    """

    moved_modules: Mapping[str, str] = field(default_factory=dict)
    flat_components: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    renamed_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    removed_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def current(self, hparams: dict[str, Any]) -> dict[str, Any]:
        """`hparams` (a checkpoint's hyper-parameters) as today's classes take them."""
        for key, (class_path, options) in self.flat_components.items():
            if key not in hparams:
                init_args = {name: hparams[name] for name in options if name in hparams}
                hparams = {name: value for name, value in hparams.items() if name not in options}
                hparams[key] = {"class_path": class_path, "init_args": init_args}
        return self._current(hparams)

    def _current(self, value: Any) -> Any:
        """`value` with every class path of a moved module replaced by its current one and every config of a class
        that renamed or removed options given them under their current names, without the removed ones, at any
        depth."""
        if isinstance(value, list):
            return [self._current(item) for item in value]
        if isinstance(value, str):
            module, _, name = value.rpartition(".")
            return f"{self.moved_modules[module]}.{name}" if module in self.moved_modules else value
        if not isinstance(value, dict):
            return value
        value = {key: self._current(item) for key, item in value.items()}
        renamed = self.renamed_options.get(value.get("class_path"), {})
        removed = self.removed_options.get(value.get("class_path"), {})
        if (renamed or removed) and isinstance(value.get("init_args"), dict):
            value["init_args"] = {
                renamed.get(name, name): item
                for name, item in value["init_args"].items()
                if not (name in removed and item == removed[name])
            }
        return value


# The core's own history: its modules that moved into its sub-packages (`core.model`, `core.maps`, `core.training`).
# Checkpoints saved before record their classes' old paths (`core.encoder.EfficientNetLite`).
CORE_HISTORY = CheckpointHistory(
    moved_modules={
        "core.attention": "core.model.attention",
        "core.encoder": "core.model.encoder",
        "core.fast_path": "core.model.fast_path",
        "core.pretrained": "core.model.pretrained",
        "core.overlays": "core.maps.overlays",
        "core.map_measures": "core.maps.measures",
        **{f"core.{name}": f"core.training.{name}" for name in (
            "averaging", "batches", "bundle", "checkpoints", "cli", "command_help", "curves", "features", "gathering",
            "hparams", "optimization", "precision", "progress", "results", "resume", "tensorboard", "wordnet"
        )},
    },
)  # fmt: skip


@dataclass(frozen=True)
class CheckpointKind:
    """A task's kind of checkpoint, as the task declares it.

    Args:
        name: what messages call it ("a captioning checkpoint").
        command: the command that takes it ("python -m captioning").
        required: the hyper-parameters every checkpoint of this kind has (its vocabularies): they tell the kinds
            apart, and a file without them is refused.
        history: how this kind's older checkpoints map onto today's classes.
        training_settings: the hyper-parameters that change how a model is trained or decodes, not what its weights
            mean, at any depth (a component's arguments among them): checkpoints of one model may differ in these
            alone and still be averaged.
    """

    name: str
    command: str
    required: tuple[str, ...]
    history: CheckpointHistory = CheckpointHistory()
    training_settings: frozenset[str] = frozenset()

    def describes(self, hparams: dict[str, Any]) -> bool:
        return all(hparams.get(name) for name in self.required)


@functools.cache
def installed_kinds() -> tuple[CheckpointKind, ...]:
    """The kinds the installed tasks declare (entry points of group `KIND_ENTRY_POINTS`), each declaration loaded only
    now; none where the project runs without being installed."""
    return tuple(entry.load() for entry in entry_points(group=KIND_ENTRY_POINTS))


def current_hyperparameters(hparams: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's hyper-parameters as this version reads them: through the history of the installed kind that
    describes them, with the modules that moved in every history (the core's own and any task's: a VQA checkpoint
    saved before the core was split out of captioning names captioning's encoder)."""
    kind = next((kind for kind in installed_kinds() if kind.describes(hparams)), None)
    history = kind.history if kind is not None else CORE_HISTORY
    return replace(history, moved_modules=moved_modules()).current(hparams)


def moved_modules() -> dict[str, str]:
    """{old module path: current one}: the core's and every installed kind's."""
    moves = dict(CORE_HISTORY.moved_modules)
    for kind in installed_kinds():
        moves.update(kind.history.moved_modules)
    return moves


def moved_class_message(error: str) -> str | None:
    """The line that tells where the classes went, when `error` (a failed import or a parser's complaint) names a
    class by a path of `moved_modules()`; None otherwise."""
    def named(path: str) -> bool:  # as an import path, or as the attribute a package lacks
        package, _, module = path.rpartition(".")
        return path in error or f"module '{package}' has no attribute '{module}'" in error

    moved = moved_modules()
    old = [path for path in moved if named(path)]
    if not old:
        return None
    moves = ", ".join(f"{path}.* is now {moved[path]}.*" for path in old)
    return f"error: a config or option names a class by a path that moved: {moves}"
