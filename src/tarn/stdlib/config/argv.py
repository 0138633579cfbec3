"""The TARN options on a command line: the parser built from the declaration, the namespace turned
into a :class:`~tarn.stdlib.config.declaration.TarnConfig` (with the environment fallbacks), and the
config rendered back into the flags that give it.

Every default is the declaration's; the parser's own defaults are None ("not given").
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn

from tarn.errors import ConfigError
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config.checks import fail, refuse, show, validate
from tarn.stdlib.config.declaration import OPTIONS, Flag, TarnConfig, cli_flag, default_of, flag_of

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class ConfigArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser that raises ConfigError (one line) instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        message = message.replace("\n", " ").removeprefix("argument ")
        raise ConfigError(f"{message}; see {self.prog} --help")


def add_config_arguments(parser: argparse.ArgumentParser, only: Iterable[str] | None = None) -> None:
    """Add the TARN flags (``only``: those options) to ``parser``; read them back with
    :func:`config_from_namespace`. Every default is None here: "not given", so that the environment
    fallbacks and then the declared defaults apply in one place."""
    wanted = set(only) if only is not None else None
    groups: dict[str, Any] = {}
    for item in OPTIONS:
        if wanted is not None and item.name not in wanted:
            continue
        flag = flag_of(item)
        if flag.group not in groups:
            groups[flag.group] = parser.add_argument_group(flag.group)
        shown = default_of(item.name)
        text = flag.help if shown in (None, False, (), "") else f"{flag.help} (default {shown})"
        kwargs: dict[str, Any] = {"dest": item.name, "default": None, "help": text}
        if flag.form == "switch":
            kwargs["action"] = "store_true"
        elif flag.form == "negated":
            kwargs["action"] = "store_false"
        elif flag.form == "toggle":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs.update(type=flag.type, metavar=flag.metavar, choices=flag.choices)
            if flag.form == "repeat":
                kwargs["action"] = "append"
        groups[flag.group].add_argument(*flag.names, **kwargs)


def config_from_namespace(namespace: argparse.Namespace, environ: Mapping[str, str]) -> TarnConfig:
    """The config a parsed namespace describes, with the environment fallbacks; not yet validated.
    Options the parser did not declare (a subset, as the launcher's) keep their defaults."""
    given = vars(namespace)
    values: dict[str, Any] = {}
    for item in OPTIONS:
        flag = flag_of(item)
        raw = given.get(item.name)
        # An empty value falls back like a missing one, but an empty --token is refused by validate.
        if (raw is None or (raw == "" and item.name != "token")) and flag.env:
            raw = next((environ[name] for name in flag.env if environ.get(name)), None)
            if raw is not None and flag.form == "toggle":
                raw = _env_bool(flag.env[0], environ)
        if raw is None:
            continue
        values[item.name] = _CONVERT.get(item.name, _same)(raw)
    return TarnConfig(**values)


def _same(value: Any) -> Any:
    return value


def parse_config(
    argv: Sequence[str], environ: Mapping[str, str], *, only: Iterable[str] | None = None, prog: str = "tarn"
) -> TarnConfig:
    """Parse the TARN flags in ``argv`` (no program name) and validate them; ConfigError if invalid."""
    parser = ConfigArgumentParser(prog=prog, allow_abbrev=False)
    add_config_arguments(parser, only)
    return validate(config_from_namespace(parser.parse_args(list(argv)), environ))


def parse_env(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``--env KEY=VALUE`` items as pairs; the value may itself contain '='."""
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            fail("env", f"{show(item)} has no '='", f"write {cli_flag('env')} KEY=VALUE")
        pairs.append((key, value))
    return tuple(pairs)


def parse_docker_mounts(items: Iterable[str]) -> tuple[str, ...]:
    """``--docker-mounts`` values (comma-separated, repeatable) as ``src:dst:mode``; mode defaults to ro."""
    return tuple(m if m.count(":") >= 2 else f"{m}:ro" for m in _split_commas(items))


def config_to_argv(
    config: TarnConfig, *, with_env: bool = True, only: Iterable[str] | None = None
) -> list[str]:
    """The flags that :func:`parse_config` turns back into ``config``, less the token and --jar.

    The token is never rendered (give the controller ``--token-file``); ``with_env=False`` also
    leaves out ``--env`` (the Triton environment, which the controller does not need); ``only``
    renders those options alone (the launcher's subset).
    """
    wanted = set(only) if only is not None else None
    argv: list[str] = []
    for item in OPTIONS:
        value = getattr(config, item.name)
        skipped = item.name in ("token", "jar") or (item.name == "env" and not with_env)
        if skipped or value is None or (wanted is not None and item.name not in wanted):
            continue
        argv += flag_words(flag_of(item), value)
    return argv


def flag_words(flag: Flag, value: Any) -> list[str]:
    """The command-line words that give ``value`` to ``flag`` (one rule for the CLI and the modules)."""
    if flag.form == "switch":
        return [flag.flag] if value else []
    if flag.form == "negated":
        return [] if value else [flag.flag]
    if flag.form == "toggle":
        return [flag.flag if value else "--no-" + flag.flag.removeprefix("--")]
    if flag.form == "repeat":
        items = sorted(value.items()) if isinstance(value, Mapping) else value
        texts = [f"{item[0]}={item[1]}" if isinstance(item, tuple) else str(item) for item in items]
        return [word for text in texts for word in (flag.flag, text)]
    return [flag.flag, str(value)]


def _split_commas(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(part for item in items for part in item.split(",") if part)


# How some options turn their command-line words into the config's value.
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "token": Secret,
    "env": parse_env,
    "docker_mounts": parse_docker_mounts,
    "docker_ports": _split_commas,
}


def _env_bool(name: str, environ: Mapping[str, str]) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw not in _FALSE:
        refuse(name, f"{show(raw)} is not a boolean", "set it to true or false")
    return False
