"""Thin clients for the cluster's REST APIs: no decisions here, only requests and replies."""
