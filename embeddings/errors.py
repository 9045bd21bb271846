"""Errors the user can act on: one clear message instead of a traceback from deep inside a library."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from sts_lightning.embeddings.io.disk_full import (
    DiskFullError,
    disk_full_cause,
    disk_full_error,
    exception_chain,
)
from sts_lightning.embeddings.io.user_form import for_this_install

__all__ = ["ConfigError", "closest_first", "did_you_mean", "first_line", "DataError", "DiskFullError", "DivergedError", "UnsupportedError", "run_or_exit", "user_errors"]


class ConfigError(ValueError):
    """A configuration value (model name, pooling, scorer option) is unknown or invalid."""


class UnsupportedError(ConfigError):
    """A valid scorer that is undefined for this encoder (CLS pooling on static word vectors): the cell is n/a."""


class DataError(ValueError):
    """Input data is missing or malformed; the message names the file and line."""


class DivergedError(FloatingPointError):
    """Training produced non-finite values (loss, weights or scores); nothing of the run is exported."""


EXIT_DISK_FULL = 74  # sysexits.h EX_IOERR ("an error occurred while doing I/O on some file"); 2 / 3 are ours


# sysexits.h EX_TEMPFAIL: stopped cleanly with last.ckpt written; a wrapper requeues exactly on it (not 0, not 143).
EXIT_PREEMPTED = 75


class Preempted(SystemExit):
    """The run stopped on a preemption signal at an optimizer-step boundary, its ``last.ckpt`` written; a
    ``SystemExit``, so no ``except Exception`` treats a requested stop as a failure."""

    def __init__(self, message: str):
        super().__init__(EXIT_PREEMPTED)
        self.message = message

    def __str__(self) -> str:
        return self.message


# sysexits.h EX_UNAVAILABLE: another rank of a DDP run died or went silent, so this one stopped (docs/reliability.md).
EXIT_RANK_LOST = 69


class RankLostError(RuntimeError):
    """Another rank of a distributed run is gone or silent (``runs/bounded_ddp.py``); this one stopped too."""


def unknown_choice(kind: str, value: object, choices: object) -> ConfigError:
    """Build the error for a value outside a fixed set, listing the valid ones."""
    names = sorted(str(c) for c in choices)  # type: ignore[union-attr]
    guess = did_you_mean(str(value), names)
    hint = f" did you mean {guess!r}?" if guess else ""
    return ConfigError(f"unknown {kind} {value!r};{hint} choose one of: {', '.join(names)}")


def first_line(err: BaseException) -> str:
    """An exception's message cut to its first line (a library's hint paragraphs dropped), else its type."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def closest_first(word: str, choices: Iterable[str]) -> list[str]:
    """``choices`` sorted by their likeness to ``word`` (``difflib`` ratio, ties alphabetical)."""
    matcher = difflib.SequenceMatcher(b=str(word).lower())
    def likeness(choice: str) -> float:
        matcher.set_seq1(str(choice).lower())
        return -matcher.ratio()
    return sorted(sorted(set(map(str, choices))), key=likeness)


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice closest to ``word`` if it is close enough to be a typo of it (``difflib``), else ``None``."""
    by_lower = {str(c).lower(): str(c) for c in sorted(map(str, choices), reverse=True)}
    match = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[match[0]] if match else None


def missing_value_message(err: Exception) -> str:
    """One line for an unset mandatory (``???``) config value: the key and how to set it."""
    key = getattr(err, "full_key", None) or "a mandatory value"
    return f"{key} must be set (it is ??? in the config): add {key}=<value> to the command line"


def run_or_exit(fn, *args):
    """Entry-point guard: user errors print one clear line and exit 2 instead of a traceback (a diverged run: 3;
    a full disk anywhere in the chain: ``EXIT_DISK_FULL`` 74; a lost rank: 69; a preempted run: 75)."""
    import sys

    from omegaconf.errors import MissingMandatoryValue

    try:
        return fn(*args)
    except (ConfigError, DataError) as err:
        print(f"error: {for_this_install(str(err))}", file=sys.stderr)
        sys.exit(2)
    except MissingMandatoryValue as err:
        print(f"error: {missing_value_message(err)}", file=sys.stderr)
        sys.exit(2)
    except (DivergedError, RankLostError) as err:  # a run that failed, not a bad input: 3; a lost peer rank: 69
        print(f"error: {err}", file=sys.stderr)
        sys.exit(3 if isinstance(err, DivergedError) else EXIT_RANK_LOST)
    except Preempted as err:  # stopped on SIGTERM / SIGUSR1 with last.ckpt written: 75, resume with ckpt_path=last
        print(f"stopped: {err}", file=sys.stderr)
        sys.exit(EXIT_PREEMPTED)
    except Exception as err:
        full = _disk_full(err)
        if full is None:
            raise
        print(f"error: {full}", file=sys.stderr)
        sys.exit(EXIT_DISK_FULL)


def _disk_full(err: BaseException | None) -> DiskFullError | None:
    """Our ``DiskFullError`` anywhere in ``err``'s chain, else one built from a bare full disk there."""
    ours = next((e for e in exception_chain(err) if isinstance(e, DiskFullError)), None)
    if ours is not None:
        return ours
    cause = disk_full_cause(err)
    return None if cause is None else disk_full_error(cause.filename or "a file")


def user_errors(fn):
    """For the Python API's entry points (``sl.train``, ``sl.load``): a user error raises as itself, without the frames
    it passed on its way up; ``__cause__`` is kept, only its printing is suppressed.
    """
    import functools

    from omegaconf.errors import MissingMandatoryValue

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ConfigError, DataError, DivergedError) as err:
            if len(err.args) == 1 and isinstance(err.args[0], str):
                err.args = (for_this_install(err.args[0]),)  # no `python train.py` for an installed package
            raise err.with_traceback(None) from None
        except MissingMandatoryValue as err:
            raise ConfigError(missing_value_message(err)) from None

    return call
