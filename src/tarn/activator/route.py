"""Where the activator sends a request, as pure functions of the request's target and the
instances the source lists (docs/scale-to-zero.md).

HAProxy sends ``/v1/`` to the OpenAI fronts and everything else to Triton, and the activator is
the backup server of both backends, so it routes the same way: a ``/v1/`` request to the
``openai_port`` of an instance that runs a front, any other to Triton's ``http_port``. Both ports
come from one :class:`~tarn.haproxy.sources.Instance` (its znode, or the controller's
``/instances``), as the sync reads them.

With instances listed but none running a front, a ``/v1/`` request can never be served: it is
answered at once in OpenAI's error shape (:func:`no_front`), never held.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from urllib.parse import urlsplit

from tarn.haproxy.plan import Endpoint
from tarn.haproxy.sources import Instances, front_endpoints, triton_endpoints
from tarn.stdlib.openai.mapping import OpenAIError

OPENAI_PREFIX = "/v1/"  # the haproxy role's ACL: path_beg /v1/


def is_openai(target: str) -> bool:
    """A request HAProxy routes to the fronts (origin form, or absolute form from a proxy)."""
    try:
        path = urlsplit(target).path
    except ValueError:  # "http://[::1/v1/x": an authority urlsplit cannot read (issue 48, item 6)
        path = target
    return path.startswith(OPENAI_PREFIX)


@dataclass(frozen=True)
class Route:
    """Where to try a request now, in order; none and no refusal: hold it."""

    endpoints: tuple[Endpoint, ...] = ()
    refusal: OpenAIError | None = None  # answer this at once: no listed instance can serve it

    @property
    def hold(self) -> bool:
        return not self.endpoints and self.refusal is None


def route(target: str, instances: Instances | None, skipped: Set[Endpoint] = frozenset()) -> Route:
    """The endpoints that may take ``target`` now, less the ones ``skipped`` (they just refused)."""
    known = instances or frozenset()
    if not is_openai(target):
        return Route(tuple(sorted(triton_endpoints(known) - skipped)))
    fronts = front_endpoints(known)
    if known and not fronts:
        return Route(refusal=no_front(len(known)))
    return Route(tuple(sorted(fronts - skipped)))


def no_front(instances: int) -> OpenAIError:
    return OpenAIError(
        404,
        f"This TARN service does not serve the OpenAI API: none of its {instances} ready instances "
        "runs an OpenAI front (the service was started without --openai-port); use /v2, or "
        "redeploy the service with --openai-port",
        code="openai_not_served",
    )


def waited_too_long(hold_timeout_s: float) -> OpenAIError:
    return OpenAIError(
        504,
        f"No instance of this TARN service became ready within {hold_timeout_s:g} s (it is "
        "starting from zero); retry later",
        kind="server_error",
        code="no_instance_ready",
    )


def too_busy(why: str) -> OpenAIError:
    message = f"TARN's activator: {why}; retry later"
    return OpenAIError(503, message, kind="server_error", code="activator_full")
