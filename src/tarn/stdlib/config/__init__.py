"""The TARN options: the seeds' ``yarn jar … Client`` flags, declared once, parsed into one validated,
frozen :class:`TarnConfig`. Import from here; three modules, one concern each:

* :mod:`~tarn.stdlib.config.declaration`: :class:`TarnConfig`, one field per option, its
  :class:`Flag` metadata (the flags, help, group, environment fallbacks, whether the launcher
  takes it). Adding an option is one field there, plus its docs.
* :mod:`~tarn.stdlib.config.argv`: derived from the declaration, the parser
  (:func:`add_config_arguments`), the namespace conversion (:func:`config_from_namespace`) and
  the argv (:func:`config_to_argv`); the launcher's subset is :data:`LAUNCHER_OPTIONS`.
* :mod:`~tarn.stdlib.config.checks`: :func:`validate`, one check per concern.

The Ansible modules' argument spec and doc fragment are generated from the declaration too
(:mod:`tarn.ansible_options`).

Same flag names and defaults as the seeds where they give them (``--port 8000``, ``--metrics-port
8002``, ``--am-port 8888``, ``--address 0.0.0.0``, ``--tp 1``, ``--pp 1``, ``--placement-tag
nvidia``, ``--scale-up 0.8``, ``--scale-down 0.2``, ``--zk-path /services/triton/instances``,
``--ranger-app-id tarn``; ``--grpc-port 8001`` is Triton's own default). Where the seeds are silent
TARN chooses: ``--min-instances 1``, ``--max-instances 4`` (the seeds' HAProxy example has four
slots), ``--cooldown 60000`` ms. ``--jar`` is accepted for compatibility and ignored (see
:attr:`TarnConfig.notes`).

Environment fallbacks (a flag always wins): ``RANGER_SERVICE``, ``RANGER_APP_ID``, ``RANGER_AUDIT``
(as in the seeds), ``TARN_TOKEN`` for ``--token`` (keeps the token out of ``ps``), and
``HADOOP_USER_NAME`` then ``USER`` for ``--user``.

Everything here is pure (standard library only: the Triton launcher parses its subset with it).
:func:`parse_config` reads only the ``argv`` and ``environ`` it is given. :func:`validate` raises
:class:`tarn.errors.ConfigError` with one line that starts with the offending flag and ends with
the fix. The token is a :class:`~tarn.stdlib.api_token.Secret`: ``repr``, ``str``,
:meth:`TarnConfig.redacted` and :func:`config_to_argv` never show it.
"""

from __future__ import annotations

from tarn.stdlib.config.argv import (
    ConfigArgumentParser,
    add_config_arguments,
    config_from_namespace,
    config_to_argv,
    flag_words,
    parse_config,
    parse_docker_mounts,
    parse_env,
)
from tarn.stdlib.config.checks import SHELL_METACHARACTERS, validate
from tarn.stdlib.config.declaration import (
    GROUPS,
    LAUNCHER_OPTIONS,
    MODEL_VERIFY_MODES,
    OPTIONS,
    READY_BUDGET_S,
    RUNTIMES,
    Flag,
    InstancePorts,
    Runtime,
    TarnConfig,
    cli_flag,
    default_of,
    flag_of,
)

__all__ = [
    "GROUPS",
    "LAUNCHER_OPTIONS",
    "MODEL_VERIFY_MODES",
    "OPTIONS",
    "READY_BUDGET_S",
    "RUNTIMES",
    "SHELL_METACHARACTERS",
    "ConfigArgumentParser",
    "Flag",
    "InstancePorts",
    "Runtime",
    "TarnConfig",
    "add_config_arguments",
    "cli_flag",
    "config_from_namespace",
    "config_to_argv",
    "default_of",
    "flag_of",
    "flag_words",
    "parse_config",
    "parse_docker_mounts",
    "parse_env",
    "validate",
]
