"""Schema templates, reviewed adversarially: a wrong type the front door read as absent, security-relevant keys an
editor without the permission could still rewrite because of how their names were written, and an editor's
translation stored under a language no request can ask for (so never served). Each test failed before its fix."""

from __future__ import annotations

import pytest

from tests.test_schema_templates import echo, editor, inline_form, post, template  # noqa: F401 (echo is a fixture)

#: plan_picnic (tests.test_schema_templates.echo): a public scenario whose output is the input it received.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("echo")]

TEXT_EDITOR = ("view_schematemplate", "change_schematemplate", "add_schemakeytext", "change_schemakeytext",
               "view_schemakeytext")  # fmt: skip


# --- 1. callback_url of the wrong type ----------------------------------------------------------------------------


@pytest.mark.parametrize("callback_url", [False, 0, [], {}, True, 1])
def test_a_callback_url_of_the_wrong_type_is_refused_not_ignored(client, callback_url):
    """``false``, ``0``, ``[]`` or ``{}`` were read as "no callback" and the scenario ran; every non-string is a 400
    naming callback_url, as a non-empty one of the wrong type already was."""
    body = {"schema_id": "plan_picnic_v1", "payload": {"place": "Park"}, "callback_url": callback_url}
    response, answer = post(client, body)
    assert response.status_code == 400, answer
    assert answer["error"]["fields"] == ["callback_url"]
    assert "received" not in answer


@pytest.mark.parametrize("absent", [None, ""])
def test_a_null_or_empty_callback_url_is_no_callback(client, absent):
    body = {"schema_id": "plan_picnic_v1", "payload": {"place": "Park"}, "callback_url": absent}
    response, answer = post(client, body)
    assert response.status_code == 200, answer
    assert answer["received"]["place"] == "Park"
