"""The command line's overrides checked against the config tree before Hydra runs: one ``error:`` line per mistake.

Why: Hydra's own reports run to many lines, and its ``+key`` hint ends seconds later in a constructor's ``TypeError``.
Parsed and composed with Hydra's parser and loader (no torch), a mistake becomes one line naming the closest valid
name (exit 2): a group option, a key (else in the group's other options), a ``+key`` the ``_target_`` does not take.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from sts_lightning.embeddings.errors import ConfigError, did_you_mean, first_line, run_or_exit
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.runs.compat import hydra_args_parser
from sts_lightning.runs.constructor_defaults import GROUP as CONSTRUCTOR_GROUP
from sts_lightning.runs.constructor_defaults import nodes as constructor_nodes
from sts_lightning.runs.constructor_defaults import register as register_constructor_defaults
from sts_lightning.runs.constructor_defaults import target_args

_SKIP = ("help", "hydra_help", "info", "shell_completion", "experimental_rerun", "config_path")


def exit_on_bad_overrides(app: str, argv: list[str] | None = None) -> None:
    """For the entry scripts, before ``@hydra.main``: a bad override prints one line and exits 2."""
    run_or_exit(check_command_line, app, sys.argv[1:] if argv is None else argv)


def check_command_line(app: str, argv: list[str]) -> None:
    """Raise ``ConfigError`` for the first override of ``argv`` that ``configs/<app>.yaml`` cannot take."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    register_constructor_defaults()  # the configs' defaults lists name these nodes (runs/constructor_defaults.py)
    args, _ = hydra_args_parser().parse_known_args(argv)
    if any(getattr(args, flag, None) for flag in _SKIP) or not args.overrides:
        return  # help, another primary config, shell completion: Hydra's business
    if args.config_dir is not None and not os.path.isdir(args.config_dir):
        return  # Hydra's own one-line error names the missing folder
    parser = OverridesParser.create()
    try:
        overrides = parser.parse_overrides(args.overrides)
    except HydraException as err:
        raise ConfigError(_unparsable(parser, args.overrides, err)) from None
    sweep = next((o for o in overrides if o.is_sweep_override()), None)
    if sweep is not None and not args.multirun:
        values = sweep.input_line.split("=", 1)[1]
        raise ConfigError(f"{sweep.input_line} holds several values: a list is {sweep.get_key_element()}=[{values}], "
                          "a sweep (one job per value) needs --multirun")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3", job_name=app):
        loader = GlobalHydra.instance().config_loader()
        _join_user_configs(loader, args.config_dir, overrides)
        groups = {o.key_or_group for o in overrides if _is_group(loader, o.key_or_group)}
        config = args.config_name or app
        for override in overrides:
            if override.key_or_group in groups and not override.is_delete():
                _check_choices(override, _group_options(loader, override.key_or_group))
        plain = [_first_value(o) for o in overrides]
        appended = any(o.is_add() or o.is_force_add() for o in overrides if o.key_or_group not in groups)
        try:
            compose(config, overrides=plain, return_hydra_config=True)
            failed = None
        except (HydraException, OmegaConfBaseException) as err:
            failed = err
        if failed is None and not appended:
            return
        # The config as the groups alone make it: where each key override must find (or must not find) its key.
        chosen = [p for p, o in zip(plain, overrides, strict=True) if o.key_or_group in groups]
        try:
            base = compose(config, overrides=chosen, return_hydra_config=True)
        except (HydraException, OmegaConfBaseException) as err:
            raise ConfigError(first_line(err)) from None
        for override in overrides:
            if override.key_or_group in groups:
                continue
            if override.is_add() or override.is_force_add():
                _check_appended(base, override)
            else:
                _check_key(base, override)
        if failed is not None:
            raise ConfigError(first_line(failed))


def _join_user_configs(loader, config_dir: str | None, overrides) -> None:
    """A user's ``--config-dir`` and ``hydra.searchpath`` folders join the search path where Hydra puts them."""
    import copy

    from hydra.core.config_search_path import SearchPathQuery

    if config_dir is not None:
        loader.config_search_path.prepend(provider="command-line", path=f"file://{os.path.abspath(config_dir)}",
                                          anchor=SearchPathQuery(provider="schema"))
    listed = copy.deepcopy(loader.config_search_path)
    folders = [config_dir] if config_dir is not None else []
    for override in overrides:
        if override.get_key_element() == "hydra.searchpath" and isinstance(override.value(), list):
            for path in override.value():
                listed.prepend(provider="hydra.searchpath in command-line", path=str(path),  # the schema stays last
                               anchor=SearchPathQuery(provider="schema"))
                if str(path).startswith("file://") or "://" not in str(path):  # a folder, not pkg://
                    folders.append(str(path).removeprefix("file://"))
    loader.repository.initialize_sources(listed)
    for folder in folders:
        _refuse_shadowed(Path(folder))


def _refuse_shadowed(folder: Path) -> None:
    """A user's file named like one of ours would be ignored without a word (Hydra reads the package's first)."""
    for path in sorted(folder.rglob("*.yaml")) if folder.is_dir() else []:
        name = path.relative_to(folder)
        if (CONFIG_DIR / name).is_file():
            stem = name.with_suffix("").as_posix()
            raise ConfigError(f"{path} has the name of a packaged config ({stem}), which Hydra reads first, so yours "
                              f"would be ignored: name it differently (e.g. {name.parent / ('my_' + name.name)}, "
                              f"with `defaults: [{name.stem}]` to start from ours)")


def _unparsable(parser, lines: list[str], err: Exception) -> str:
    """Hydra's parse error names the grammar rule, not the override: name the first override that fails alone."""
    from hydra.errors import HydraException

    for line in lines:
        try:
            parser.parse_overrides([line])
        except HydraException as one:
            key = line.split("=", 1)[0]
            return (f"cannot parse the override {line!r}: {first_line(one)}; quote a value with spaces, brackets or "
                    f"quotes as a whole, e.g. \"{key}='...'\" (inner quotes as \\')")
    return first_line(err)


def _first_value(override) -> str:
    """The override as Hydra text, a sweep (``model=a,b``) reduced to its first value for composing."""
    if not override.is_sweep_override():
        return override.input_line
    prefix = "+" if override.is_add() else "++" if override.is_force_add() else ""
    return f"{prefix}{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}"


def _is_group(loader, key: str) -> bool:
    """Whether ``key`` names a config group: one ``list_groups`` call on its parent (each call rescans the tree)."""
    parent, _, name = key.rpartition("/")
    return "." not in key and name in loader.list_groups(parent)


def _group_options(loader, group: str) -> list[str]:
    """Every ``<group>=<option>``, those in subfolders too (``experiment=<method>/<recipe>``)."""
    from hydra.core.object_type import ObjectType

    options = list(loader.get_group_options(group, results_filter=ObjectType.CONFIG))
    for sub in loader.list_groups(group):
        options += [f"{sub}/{name}" for name in _group_options(loader, f"{group}/{sub}")]
    return sorted(options)


def _check_choices(override, options: list[str]) -> None:
    values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.value()]
    for value in values:
        if value is None or not isinstance(value, str) or value in options:
            continue
        guess = did_you_mean(value, options)
        hint = f"; did you mean {guess!r}?" if guess else ""
        raise ConfigError(f"unknown {override.key_or_group} {value!r}{hint} (choices: {', '.join(options)})")


def _walk(cfg, parts: list[str]):
    """(deepest node reached, how many of ``parts`` were found, whether the path ran into a plain value)."""
    node = cfg
    for i, part in enumerate(parts):
        if isinstance(node, DictConfig):
            if part not in node.keys():
                return node, i, False
            node = node._get_node(part)
        elif isinstance(node, ListConfig):
            if not (part.isdigit() and int(part) < len(node)):
                return node, i, False
            node = node._get_node(int(part))
        else:
            return node, i, True
    return node, len(parts), False


def _choice(cfg: DictConfig, group: str) -> str | None:
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return choices.get(group) if group in choices else None


def _check_key(cfg: DictConfig, override) -> None:
    """An override of a key (not a group) whose path is not in the composed config: the closest key instead."""
    key = override.key_or_group
    parts = key.split(".")
    node, found, through_value = _walk(cfg, parts)
    if found == len(parts):
        return
    if through_value:
        raise ConfigError(f"{'.'.join(parts[:found])} is a value, not a group of keys: {key} cannot be set")
    where = ".".join(parts[:found])
    candidates = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    choice = _choice(cfg, parts[0])
    selected = f" ({parts[0]}={choice})" if choice and found >= 1 else ""
    known = ", ".join(sorted(c for c in candidates if not c.startswith("_")))
    hint = _hint(where, did_you_mean(parts[found], candidates), parts, choice, f"{where or 'the config'} has: {known}")
    raise ConfigError(f"unknown key {key!r}{selected}; {hint}")


def _hint(where: str, guess: str | None, parts: list[str], choice: str | None, otherwise: str) -> str:
    """The closest key: ``guess`` beside it, else one in another option, or ``otherwise``."""
    if guess:
        return f"did you mean {_join(where, guess)!r}?"
    elsewhere = _in_other_options(parts, choice)
    return f"did you mean {elsewhere[0]!r}? (a key of {elsewhere[1]})" if elsewhere else otherwise


def _in_other_options(parts: list[str], choice: str | None) -> tuple[str, str] | None:
    """The closest key to ``parts`` that another option of the group ``parts[0]`` has (its yaml read as is)."""
    folder = CONFIG_DIR / parts[0]
    if choice is None or len(parts) < 2 or not folder.is_dir():
        return None
    found: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        data = _with_constructor_nodes(OmegaConf.to_container(OmegaConf.create(text)) if text.strip() else {})
        inner = parts if "@package _global_" in text else parts[1:]
        node = data
        for part in inner[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            guess = did_you_mean(inner[-1], [str(k) for k in node])
            if guess:
                found.setdefault(_join(".".join(parts[:-1]), guess), []).append(
                    f"{parts[0]}={path.relative_to(folder).with_suffix('').as_posix()}")
    if not found:
        return None
    best = did_you_mean(".".join(parts), found, cutoff=0) or next(iter(found))
    return best, ", ".join(found[best])


def _with_constructor_nodes(data: dict) -> dict:
    """A config file's keys plus those of the ``/constructor@<package>: <Class>`` nodes it names, not composed."""
    known = constructor_nodes()
    for entry in data.get("defaults") or []:
        if not isinstance(entry, dict):
            continue
        for key, name in entry.items():
            group, _, package = str(key).partition("@")
            if group.strip("/") != CONSTRUCTOR_GROUP or name not in known:
                continue
            node = known[name]
            if package in ("", "_here_"):
                data = {**node, **data}
            else:
                data[package] = {**node, **(data.get(package) or {})}
    return data


def _check_appended(cfg: DictConfig, override) -> None:
    """``+key``: the key must be new, and the node's ``_target_`` (if any) must take it."""
    key = override.key_or_group
    parts = key.split(".")
    node, found, _ = _walk(cfg, parts)
    if found == len(parts):
        if override.is_add():
            raise ConfigError(f"{key} is already set: override it without the '+' ({key}=...)")
        return
    if found != len(parts) - 1 or not isinstance(node, DictConfig) or "_target_" not in node:
        return
    name = parts[-1]
    accepted = target_args(str(node._get_node("_target_")._value()))
    if accepted is None or name in accepted or name.startswith("_"):
        return
    where = ".".join(parts[:-1])
    cls = str(node._get_node("_target_")._value()).rpartition(".")[2]
    choice = _choice(cfg, parts[0])
    selected = f" ({parts[0]}={choice})" if choice else ""
    hint = _hint(where, did_you_mean(name, accepted), parts, choice, f"it takes: {', '.join(sorted(accepted))}")
    plus = "++" if override.is_force_add() else "+"
    raise ConfigError(f"{cls}{selected} takes no argument {name!r}, so {plus}{key} cannot be added; {hint}")


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name
