"""The errors TARN raises: one base class, so every front end (CLI, modules) catches one type."""


class TarnError(Exception):
    """Anything TARN reports to its user as a one-line reason."""


class ClusterError(TarnError):
    """A cluster service (RM, WebHDFS, ZooKeeper) refused a request or could not be reached."""


class ConfigError(TarnError):
    """Invalid options, found before anything is submitted: one line naming the flag and the fix."""
