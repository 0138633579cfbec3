"""tarn.ranger.public_api against canned answers: the requests it makes and how it reads Admin's."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import requests.adapters

from tarn.ranger.admin import RangerAdminError
from tarn.ranger.public_api import PublicApi

URL = "http://ranger:6080"
API = URL + "/service/public/v2/api"


class Canned(requests.adapters.BaseAdapter):
    """Answers each request with the next (status, JSON body) and keeps the requests."""

    def __init__(self, *answers: tuple[int, Any]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.sent: list[requests.PreparedRequest] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        self.sent.append(request)
        status, body = self.answers.pop(0)
        if isinstance(body, Exception):
            raise body
        reply = requests.Response()
        reply.status_code, reply.request, reply.url = status, request, str(request.url)
        reply._content = b"" if body is None else json.dumps(body).encode()
        return reply

    def close(self) -> None:
        pass


def api(*answers: tuple[int, Any]) -> tuple[PublicApi, Canned]:
    adapter = Canned(*answers)
    session = requests.Session()
    session.mount("http://", adapter)
    return PublicApi(URL, "admin", "pw", session=session), adapter


SDEF = {"id": 1, "name": "triton"}
POLICY = {"name": "p", "service": "triton prod"}


@pytest.mark.parametrize(
    ("call", "answer", "method", "url", "body", "returned"),
    [
        (lambda a: a.service_def("triton"), (200, SDEF), "GET", f"{API}/servicedef/name/triton", None, SDEF),
        (lambda a: a.service_def("triton"), (404, {"msgDesc": "Not found"}), "GET", None, None, None),
        (lambda a: a.service("a b"), (404, None), "GET", f"{API}/service/name/a%20b", None, None),
        (lambda a: a.create_service_def(SDEF), (200, SDEF), "POST", f"{API}/servicedef", SDEF, SDEF),
        (lambda a: a.update_service("s", {"name": "s"}), (200, {"name": "s"}), "PUT", f"{API}/service/name/s",
         {"name": "s"}, {"name": "s"}),
        (lambda a: a.policies("triton prod"), (200, [POLICY]), "GET", f"{API}/service/triton%20prod/policy",
         None, [POLICY]),
        (lambda a: a.policies("gone"), (404, None), "GET", None, None, []),
        (lambda a: a.create_policy(POLICY), (200, POLICY), "POST", f"{API}/policy", POLICY, POLICY),
        (lambda a: a.create_policy(POLICY, create_principals=True), (200, POLICY), "POST",
         f"{API}/policy?createPrincipalsIfAbsent=true", POLICY, POLICY),
        (lambda a: a.update_policy(7, POLICY), (200, POLICY), "PUT", f"{API}/policy/7", POLICY, POLICY),
        (lambda a: a.delete_policy(7), (204, None), "DELETE", f"{API}/policy/7", None, None),
    ],
)  # fmt: skip
def test_requests_and_answers(
    call: Any, answer: tuple[int, Any], method: str, url: str | None, body: Any, returned: Any
) -> None:
    admin, adapter = api(answer)
    assert call(admin) == returned
    (sent,) = adapter.sent
    assert sent.method == method
    if url is not None:
        assert sent.url == url
    assert sent.headers["Authorization"].startswith("Basic ")
    if body is None:
        assert sent.body is None
    else:
        assert json.loads(sent.body or b"") == body
        assert sent.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            (400, {"statusCode": 1, "msgDesc": "Operation denied. User name: mallory specified in policy"}),
            "answered 400 to POST /service/public/v2/api/policy: Operation denied. User name: mallory",
        ),
        ((401, {"msgDesc": "Authentication Failed"}), "admin_user: Ranger Admin answered 401 to POST"),
        ((500, None), "Ranger Admin answered 500 to POST /service/public/v2/api/policy: no body"),
        ((200, ["not", "an object"]), "answered POST /service/public/v2/api/policy with no JSON object"),
        ((0, requests.ConnectionError("refused")), "url: no answer from Ranger Admin at http://ranger:6080"),
    ],
)
def test_failures_name_the_request_and_admin_s_reason(answer: tuple[int, Any], message: str) -> None:
    admin, _adapter = api(answer)
    with pytest.raises(RangerAdminError, match=message):
        admin.create_policy(POLICY)
