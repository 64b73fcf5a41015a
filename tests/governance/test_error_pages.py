"""The 403, 404 and 500 pages say what happened and where to go, in the site's chrome;
under /api/ the same errors are problem+json."""

from __future__ import annotations

from django.test import Client, RequestFactory

from iris_site import handlers, urls

TWO_STEP = "/accounts/two-step/"  # operators only: a member is refused with a 403


def test_handler403_is_wired() -> None:
    assert urls.handler403 == "iris_site.handlers.forbidden"


def test_a_refused_page_is_the_styled_403(client, member) -> None:
    client.force_login(member)
    response = client.get(TWO_STEP)
    assert response.status_code == 403
    page = response.content.decode()
    assert "<h1>You cannot open this page</h1>" in page
    assert 'class="site-header"' in page and 'href="/"' in page
    assert "Go to the home page" in page


def test_a_form_without_its_token_gets_the_expired_form_page(member) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(member)
    response = strict.post("/memory/off-the-record/", {"enabled": "on"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "This form has expired" in page and "Nothing was changed." in page


def test_a_missing_page_is_the_styled_404_with_a_way_on(client, member) -> None:
    client.force_login(member)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "<h1>Page not found</h1>" in page
    assert 'href="/memory/"' in page and "Go to the home page" in page


def test_the_500_page_stands_alone_and_says_the_fault_is_ours(rf: RequestFactory) -> None:
    response = handlers.server_error(rf.get("/memory/"))
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong" in page and "the fault is ours" in page
    assert 'href="/"' in page


def test_api_errors_stay_problem_json(rf: RequestFactory) -> None:
    for response, status in (
        (handlers.forbidden(rf.get("/api/v1/memories")), 403),
        (handlers.not_found(rf.get("/api/v1/nothing")), 404),
        (handlers.server_error(rf.get("/api/v1/memories")), 500),
    ):
        assert response.status_code == status
        assert response["Content-Type"] == "application/problem+json"
