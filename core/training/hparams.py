"""Hyper-parameters as plain data, so a checkpoint loads with `torch.load(weights_only=True)`.

Under LightningCLI a module's hyper-parameters are already the parsed YAML (class paths and numbers). A
module built in Python instead records the objects it was given; these are turned into the same form:
an nn.Module into {"class_path", "init_args"} read back from its constructor's parameters (classes among
them as import paths), a class into its import path.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


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
