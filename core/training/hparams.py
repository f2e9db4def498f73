"""Hyper-parameters as plain data, so a checkpoint loads with `torch.load(weights_only=True)`.

Under LightningCLI a module's hyper-parameters are already the parsed YAML (class paths and numbers). A
module built in Python instead records the objects it was given; these are turned into the same form:
an nn.Module into {"class_path", "init_args"} read back from its constructor's parameters (classes among
them as import paths), a class into its import path.
"""

from __future__ import annotations

import functools
import inspect
from importlib.metadata import entry_points
from typing import Any

# The entry-point group (pyproject.toml) where a task declares the modules whose classes moved since its older
# checkpoints were saved, as {old module path: current one}: such checkpoints record the old import paths in their
# hyper-parameters, and still load.
MOVED_ENTRY_POINTS = "visual_attention.moved_modules"


# This package's own modules that moved into its sub-packages (`core.model`, `core.maps`, `core.training`): checkpoints
# saved before record their classes' old paths (`core.encoder.EfficientNetLite`, `core.attention.AdditiveScore`).
CORE_MOVES = {
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
}


@functools.cache
def moved_modules() -> dict[str, str]:
    """{old module path: current one}: this package's (`CORE_MOVES`) and every installed task's
    (`MOVED_ENTRY_POINTS`)."""
    moves = dict(CORE_MOVES)
    for entry in entry_points(group=MOVED_ENTRY_POINTS):
        moves.update(entry.load())
    return moves


def import_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def class_config(obj: object) -> dict[str, Any]:
    """{"class_path", "init_args"} of an object whose constructor arguments are kept as same-named attributes."""
    init_args = {}
    for name, parameter in inspect.signature(type(obj).__init__).parameters.items():
        if name == "self" or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if not hasattr(obj, name):
            raise TypeError(f"{type(obj).__name__} does not keep its argument {name!r} as an attribute")
        value = getattr(obj, name)
        init_args[name] = import_path(value) if isinstance(value, type) else value
    return {"class_path": import_path(type(obj)), "init_args": init_args}


def plain_hyperparameters(hparams: dict[str, Any], **objects: Any) -> dict[str, Any]:
    """The given entries of `hparams` as plain data: modules as class configs, classes as import paths.

    Entries that are already plain (strings, dicts from a YAML config) are left as they are.
    """
    plain = {}
    for key, value in objects.items():
        current = hparams.get(key)
        if isinstance(current, (str, dict)):
            continue
        if isinstance(value, type):
            plain[key] = import_path(value)
        elif value is not None:
            plain[key] = class_config(value)
    return plain


def factory_config(factory: Any) -> dict[str, Any]:
    """{"class_path", "init_args"} of a class-returning callable given as a component's argument (a decoder built
    once the data fixes its sizes): a class, a `functools.partial` of one (as written in Python, or as
    jsonargparse makes it from YAML), or its config already. `init_args` are the class's keyword-only
    parameters, the options a config sets, with the partial's values over the class's defaults; classes among
    them as import paths. The leading parameters, which the caller gives, are left out."""
    if isinstance(factory, dict):
        return factory
    keywords = {}
    if isinstance(factory, functools.partial):
        # jsonargparse's partials call its instantiator with the class: the class is the first class among
        # the partial's function and arguments
        keywords = dict(factory.keywords)
        factory = next(item for item in (factory.func, *factory.args) if isinstance(item, type))
    init_args = {
        name: keywords.get(name, parameter.default)
        for name, parameter in inspect.signature(factory.__init__).parameters.items()
        if parameter.kind is parameter.KEYWORD_ONLY
    }
    init_args = {name: import_path(value) if isinstance(value, type) else value for name, value in init_args.items()}
    return {"class_path": import_path(factory), "init_args": init_args}


def component_from_flat_options(hparams: dict[str, Any], *, key: str, class_path: str, options: tuple[str, ...]) -> dict:
    """A checkpoint's hyper-parameters with the options of a part saved before it became a component (flat, at the
    top level) gathered under `key` as {"class_path", "init_args"}; the part's weights already sit under `key.`.
    Hyper-parameters that have `key` are returned as they are."""
    if key in hparams:
        return hparams
    hparams = dict(hparams)
    init_args = {name: hparams.pop(name) for name in options if name in hparams}
    hparams[key] = {"class_path": class_path, "init_args": init_args}
    return hparams


def without_removed_options(hparams: dict[str, Any], *, key: str, removed: dict[str, dict[str, Any]]) -> dict:
    """A checkpoint's hyper-parameters without the options that the class of component `key` no longer takes, where
    they hold the value the class now always uses: `removed` is {class path: {option: that value}}. An option saved at
    another value is kept, so that building the class refuses it by name."""
    component = hparams.get(key)
    if not isinstance(component, dict) or component.get("class_path") not in removed:
        return hparams
    gone = removed[component["class_path"]]
    init_args = {
        name: value
        for name, value in (component.get("init_args") or {}).items()
        if not (name in gone and value == gone[name])
    }
    return {**hparams, key: {**component, "init_args": init_args}}


def current_class_paths(value: Any) -> Any:
    """`value` (hyper-parameters: nested dicts, lists and strings) with every class path of a moved module
    (`moved_modules`) replaced by its current one."""
    if isinstance(value, dict):
        return {key: current_class_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [current_class_paths(item) for item in value]
    if isinstance(value, str) and "." in value:
        module, _, name = value.rpartition(".")
        moves = moved_modules()
        if module in moves:
            return f"{moves[module]}.{name}"
    return value
