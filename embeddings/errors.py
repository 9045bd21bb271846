"""Errors the user can act on: one clear message instead of a traceback from deep inside a library."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value (model name, pooling, scorer option) is unknown or invalid."""


class UnsupportedError(ConfigError):
    """A valid scorer that is undefined for this encoder (CLS pooling or SBERT-WK on static word vectors).

    Separate from other config errors so a comparison run can mark the cell n/a and go on.
    """


class DataError(ValueError):
    """Input data is missing or malformed; the message names the file and line."""


def unknown_choice(kind: str, value: object, choices: object) -> ConfigError:
    """Build the error for a value outside a fixed set, listing the valid ones."""
    valid = ", ".join(sorted(str(c) for c in choices))  # type: ignore[union-attr]
    return ConfigError(f"unknown {kind} {value!r}; choose one of: {valid}")


def run_or_exit(fn, *args):
    """Entry-point guard: user errors print one clear line and exit 2 instead of a deep traceback."""
    import sys

    try:
        return fn(*args)
    except (ConfigError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
