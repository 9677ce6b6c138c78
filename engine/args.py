"""Command-line flags generated from `EngineSettings`, so every CLI that builds an engine (`pipeline run`,
`backfill`, `eval`, `bench`) spells, types, documents and defaults a setting the same way: `--max-num-seqs` is
the field `max_num_seqs`, its choices come from the field's type and its help text from the field's description.
A flag left out keeps the engine's default (`engine_overrides` returns only what was given)."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterable
from typing import Any

from engine.config import EngineSettings

# Fields with a flag of their own shape elsewhere (speculative_config is parsed from `--speculative`), or more
# than one spelling kept for users of an older flag.
_ALIASES = {"context_parallel_size": ("--context-parallel",)}
_NOT_A_FLAG = {"speculative_config"}


def byte_size(text: str) -> int:
    """'512M', '4G', '65536' -> bytes (K, M, G are powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B")
    try:
        return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 512M, 4G, 65536)") from None


# byte counts written as 512M or 4G
_TYPES = {"kv_cache_memory": (byte_size, "SIZE"), "memory_limit": (byte_size, "SIZE")}


def engine_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _value_type(annotation: Any) -> tuple[Any, tuple[Any, ...] | None]:
    """(argparse type, choices) of a field annotation such as `int | None` or `Literal["auto", "int8"] | None`."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if typing.get_origin(annotation) is typing.Literal:
        choices = typing.get_args(annotation)
        return type(choices[0]), choices
    return annotation, None


def add_engine_args(parser: Any, names: Iterable[str] | None = None, helps: dict[str, str] | None = None,
                    **defaults: Any) -> None:
    """Add a flag per engine setting (all but speculative_config, or only `names`) to `parser` (an
    ArgumentParser or argument group). Their default is None ("the engine's default", shown in the help) unless
    `defaults` gives a command's own; `helps` replaces a field's description where a command uses it its own
    way."""
    fields = EngineSettings.model_fields
    for name in names if names is not None else [n for n in fields if n not in _NOT_A_FLAG]:
        info = fields[name]
        default = defaults.get(name)
        shown = default if name in defaults else info.default
        help_text = (helps or {}).get(name, info.description) + (f" (default: {shown})" if shown is not None else "")
        flags = (engine_flag(name), *_ALIASES.get(name, ()))
        if info.annotation is bool:
            parser.add_argument(*flags, dest=name, default=default, action=argparse.BooleanOptionalAction,
                                help=help_text)
            continue
        kind, choices = _value_type(info.annotation)
        kind, metavar = _TYPES.get(name, (kind, None if choices else "N" if kind is int else "VALUE"))
        parser.add_argument(*flags, dest=name, default=default, type=kind, choices=choices, metavar=metavar,
                            help=help_text)


def engine_overrides(args: argparse.Namespace, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The engine settings given on the command line (flags left out are not in the result)."""
    fields = names if names is not None else [n for n in EngineSettings.model_fields if n not in _NOT_A_FLAG]
    return {n: getattr(args, n) for n in fields if getattr(args, n, None) is not None}
