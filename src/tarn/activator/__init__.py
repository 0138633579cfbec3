"""The activator: holds requests while a service has no ready instance (scale to zero)."""
