"""Errors the user can act on: one clear message instead of a traceback from deep inside a library."""

from __future__ import annotations

from sts_lightning.embeddings.io.disk_full import (
    DiskFullError,
    disk_full_cause,
    disk_full_error,
    exception_chain,
)

__all__ = ["ConfigError", "DataError", "DiskFullError", "DivergedError", "UnsupportedError", "run_or_exit"]


class ConfigError(ValueError):
    """A configuration value (model name, pooling, scorer option) is unknown or invalid."""


class UnsupportedError(ConfigError):
    """A valid scorer that is undefined for this encoder (CLS pooling or SBERT-WK on static word vectors).

    Separate from other config errors so a comparison run can mark the cell n/a and go on.
    """


class DataError(ValueError):
    """Input data is missing or malformed; the message names the file and line."""


class DivergedError(FloatingPointError):
    """Training produced non-finite values (loss, weights or scores); nothing of the run is exported."""


DISK_FULL_EXIT = 74  # sysexits.h EX_IOERR ("an error occurred while doing I/O on some file"); 2 / 3 are ours


def unknown_choice(kind: str, value: object, choices: object) -> ConfigError:
    """Build the error for a value outside a fixed set, listing the valid ones."""
    valid = ", ".join(sorted(str(c) for c in choices))  # type: ignore[union-attr]
    return ConfigError(f"unknown {kind} {value!r}; choose one of: {valid}")


def missing_value_message(err: Exception) -> str:
    """One line for an unset mandatory (``???``) config value: the key and how to set it.

    Why: OmegaConf raises ``MissingMandatoryValue`` from wherever the value is first read, deep inside
    instantiation, with a 30-line traceback; the user needs only the key and an example.
    """
    key = getattr(err, "full_key", None) or "a mandatory value"
    return f"{key} must be set (it is ??? in the config): add {key}=<value> to the command line"


def run_or_exit(fn, *args):
    """Entry-point guard: user errors print one clear line and exit 2 (a diverged run: 3, a full disk:
    ``DISK_FULL_EXIT``) instead of a traceback.

    A full disk is found anywhere in the exception's chain: Lightning, Hydra or torch may wrap it.
    """
    import sys

    from omegaconf.errors import MissingMandatoryValue

    try:
        return fn(*args)
    except (ConfigError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except MissingMandatoryValue as err:
        print(f"error: {missing_value_message(err)}", file=sys.stderr)
        sys.exit(2)
    except DivergedError as err:  # a run that failed, not a bad input: its own exit code
        print(f"error: {err}", file=sys.stderr)
        sys.exit(3)
    except Exception as err:
        full = _disk_full(err)
        if full is None:
            raise
        print(f"error: {full}", file=sys.stderr)
        sys.exit(DISK_FULL_EXIT)


def _disk_full(err: BaseException | None) -> DiskFullError | None:
    """Our ``DiskFullError`` anywhere in ``err``'s chain (a logger's write failing while Lightning handles it
    must not hide which checkpoint failed), else one built from a bare full disk there (a write outside
    ``embeddings.io.atomic``)."""
    ours = next((e for e in exception_chain(err) if isinstance(e, DiskFullError)), None)
    if ours is not None:
        return ours
    cause = disk_full_cause(err)
    return None if cause is None else disk_full_error(cause.filename or "a file")
