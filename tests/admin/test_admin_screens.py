"""Editors set the site profile and content signals in the Django admin; agents see the change."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote  # job ids are token_urlsafe: '_' must be quoted
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.contrib.messages import get_messages

from agent_handshake.models import AgentClient, ApiKey, ContentSignalOverride, Document, SiteProfile
from demo_site.shop.models import Order
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

CHANGE_URL = "/admin/agent_handshake/siteprofile/1/change/"


def editor(*codenames: str) -> User:
    user = User.objects.create_user("editor", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="agent_handshake", codename__in=codenames)
    )
    return user


def profile_form(**overrides) -> dict:
    data = {
        "name": "Lantern & Kettle",
        "description": "Tea shop.",
        "contact_email": "hi@example.com",
        "contact_url": "",
        "contact_phone": "",
        "postal_address": "",
        "ai_input": "on",
        "search": "on",
        "attribution_required": "on",
        "signal_overrides-TOTAL_FORMS": "0",
        "signal_overrides-INITIAL_FORMS": "0",
        "signal_overrides-MIN_NUM_FORMS": "0",
        "signal_overrides-MAX_NUM_FORMS": "1000",
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not None}


def test_editor_with_permission_changes_signals_and_agents_see_it(client, django_capture_on_commit_callbacks):
    SiteProfile.objects.create(name="Old name", ai_train=False)
    client.force_login(
        editor(
            "view_siteprofile",
            "change_siteprofile",
            "add_contentsignaloverride",
            "change_contentsignaloverride",
            "view_contentsignaloverride",
        )
    )
    article_type = ContentType.objects.get_for_model(Article)
    form = profile_form(
        ai_train="on",
        **{
            "signal_overrides-TOTAL_FORMS": "1",
            "signal_overrides-0-content_type": str(article_type.pk),
            "signal_overrides-0-ai_train": "False",
            "signal_overrides-0-ai_input": "",
            "signal_overrides-0-search": "False",
            "signal_overrides-0-attribution_required": "",
        },
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(CHANGE_URL, form)
    assert response.status_code == 302, response.content.decode()[:2000]

    manifest = client.get("/.well-known/agent.json").json()
    assert manifest["name"] == "Lantern & Kettle"
    assert manifest["content_signals"]["ai_train"] is True
    assert client.get("/page/")["Content-Signal"] == "search=yes, ai-input=yes, ai-train=yes"
    override = ContentSignalOverride.objects.get()
    assert (override.ai_train, override.ai_input, override.search) == (False, None, False)


def test_override_choices_are_limited_to_registered_models(client):
    SiteProfile.objects.create(name="S")
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    html = client.get(CHANGE_URL).content.decode()
    assert f'value="{ContentType.objects.get_for_model(Article).pk}"' in html
    assert f'value="{ContentType.objects.get_for_model(Order).pk}"' not in html


def test_editor_without_permission_cannot_change_the_profile(client):
    SiteProfile.objects.create(name="Kept")
    client.force_login(editor("view_siteprofile"))
    response = client.post(CHANGE_URL, profile_form(name="Hijacked"))
    assert response.status_code == 403
    assert SiteProfile.objects.get().name == "Kept"


def test_profile_is_a_singleton(client):
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    assert client.get("/admin/agent_handshake/siteprofile/")["Location"].endswith("/siteprofile/add/")
    # The add form starts from the settings' defaults.
    assert 'value="Test Site"' in client.get("/admin/agent_handshake/siteprofile/add/").content.decode()
    SiteProfile.objects.create(name="One")
    SiteProfile(name="Two").save()
    assert SiteProfile.objects.count() == 1
    assert client.get("/admin/agent_handshake/siteprofile/")["Location"].endswith(CHANGE_URL)
    assert client.get("/admin/agent_handshake/siteprofile/add/").status_code == 403
    assert client.post("/admin/agent_handshake/siteprofile/1/delete/").status_code == 403


def test_documents_are_read_only_in_admin(client, publish):
    publish(Article, title="Read me", slug="read-me")
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    listing = client.get("/admin/agent_handshake/document/")
    assert listing.status_code == 200
    assert "Read me" in listing.content.decode()
    document = Document.objects.get()
    assert client.get("/admin/agent_handshake/document/add/").status_code == 403
    assert client.post(f"/admin/agent_handshake/document/{document.pk}/change/", {"title": "x"}).status_code == 403
    assert Document.objects.get().title == "Read me"


@pytest.mark.django_db
def test_jobs_are_read_only_in_the_admin(admin_client):
    from agent_handshake.models import Job

    job = Job.objects.create(capability="compile_report", query="tea", callback_url="https://agent.example/cb",
                             callback_last_error="503 Service Unavailable")  # fmt: skip
    url = f"/admin/agent_handshake/job/{quote(job.pk)}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert b"503 Service Unavailable" in page.content  # every field shown, none editable
    assert b'name="capability"' not in page.content
    assert admin_client.post(url, {"capability": "changed"}).status_code == 403
    job.refresh_from_db()
    assert job.capability == "compile_report"
    assert admin_client.get("/admin/agent_handshake/job/add/").status_code == 403


def test_a_new_api_keys_secret_is_shown_once_and_stored_nowhere(admin_client):
    agent = AgentClient.objects.create(name="Crawler Co")
    response = admin_client.post(
        "/admin/agent_handshake/apikey/add/", {"client": agent.pk, "name": "production", "scopes": ["*"]}
    )
    assert response.status_code == 200
    key = ApiKey.objects.get()
    secret = response.context["secret"]
    assert key.secret() == secret  # the real secret ...
    assert secret in response.content.decode()  # ... on the response page
    assert "no-store" in response["Cache-Control"]

    # Stored nowhere: not in the session, a cookie, or the message storage.
    assert secret not in json.dumps(dict(admin_client.session.items()), default=str)
    assert all(secret not in morsel.value for morsel in admin_client.cookies.values())
    assert all(secret not in str(message) for message in get_messages(response.wsgi_request))
    assert all(secret not in morsel.value for morsel in response.cookies.values())
    assert LogEntry.objects.count() == 1  # the admin's history of the addition, without the secret
    assert secret not in json.dumps(list(LogEntry.objects.values()), default=str)
    # And not on the next page.
    for url in ("/admin/agent_handshake/apikey/", f"/admin/agent_handshake/apikey/{key.pk}/change/"):
        following = admin_client.get(url)
        assert following.status_code == 200
        assert secret not in following.content.decode()


class _FormFields(HTMLParser):
    """What a browser would post back from an admin change page: every input, checked box, selected option and
    textarea of its form, as shown."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.data.setdefault(name, []).append(a.get("value", "on" if a.get("type") == "checkbox" else ""))
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select].append(a.get("value", ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.data[self._textarea][0] += data.lstrip("\n") if not self.data[self._textarea][0] else data


def shown_form(client, url: str) -> dict[str, list[str]]:
    page = client.get(url)
    assert page.status_code == 200
    parser = _FormFields()
    parser.feed(page.content.decode())
    return {name: values for name, values in parser.data.items() if name not in ("action", "q")}


def test_revoking_api_keys_needs_the_change_permission(client):
    key, _ = ApiKey.objects.issue(AgentClient.objects.create(name="Crawler Co"))
    user = editor("view_apikey", "view_agentclient")
    client.force_login(user)
    response = client.post(
        "/admin/agent_handshake/apikey/", {"action": "revoke", "_selected_action": [key.pk], "index": "0"}
    )
    assert response.status_code in (200, 302)
    key.refresh_from_db()
    assert key.revoked_at is None  # a view-only user cannot revoke

    user.user_permissions.add(Permission.objects.get(codename="change_apikey"))
    client.post("/admin/agent_handshake/apikey/", {"action": "revoke", "_selected_action": [key.pk], "index": "0"})
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_editing_a_key_keeps_a_revocation_made_meanwhile(admin_client, client):
    """An operator edits a key's name while another revokes it: the edit must not bring the key back."""
    agent = AgentClient.objects.create(name="Crawler Co")
    key, secret = ApiKey.objects.issue(agent, name="old name")
    url = f"/admin/agent_handshake/apikey/{key.pk}/change/"
    form = shown_form(admin_client, url)  # the page the first operator is looking at

    admin_client.post("/admin/agent_handshake/apikey/", {"action": "revoke", "_selected_action": [key.pk]})
    assert ApiKey.objects.get().revoked_at is not None

    form["name"] = ["new name"]
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    key.refresh_from_db()
    assert key.name == "new name"
    assert key.revoked_at is not None
    refused = client.post(
        "/agent/converse", {"query": "tea"}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert refused.status_code == 401

    # Clearing the revocation on a page that shows it still takes the key back into use.
    form = shown_form(admin_client, url)
    assert form["revoked_at_0"] != [""]
    form["revoked_at_0"], form["revoked_at_1"] = [""], [""]
    assert admin_client.post(url, form).status_code == 302
    assert ApiKey.objects.get().revoked_at is None


def test_editing_a_client_keeps_a_deactivation_made_meanwhile(admin_client):
    agent = AgentClient.objects.create(name="Crawler Co")
    url = f"/admin/agent_handshake/agentclient/{agent.pk}/change/"
    form = shown_form(admin_client, url)

    AgentClient.objects.filter(pk=agent.pk).update(is_active=False)  # another operator deactivates it

    form["description"] = ["Runs the Crawler Co assistant."]
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.description == "Runs the Crawler Co assistant."
    assert agent.is_active is False


@pytest.mark.parametrize(
    "url",
    [
        "/admin/agent_handshake/job/?status=%00",
        "/admin/agent_handshake/job/?capability__exact=%00",
        "/admin/agent_handshake/job/?callback_state=%00",
        "/admin/agent_handshake/job/?created_at__year=9999",
        "/admin/agent_handshake/job/?created_at__year=99999999999",
        "/admin/agent_handshake/job/?created_at__year=9999&created_at__month=12",
        "/admin/agent_handshake/deskrequest/?status=%00",
        "/admin/agent_handshake/document/?ahp_content_type=%00",
        "/admin/agent_handshake/document/?updated_at__year=9999",
        "/admin/agent_handshake/interaction/?capability=%00",
        "/admin/agent_handshake/proposedfield/?status__exact=%00",
        "/admin/agent_handshake/proposedfield/?capability=%00",
        "/admin/agent_handshake/contentgap/?status=%00",
    ],
)
def test_odd_filters_in_admin_lists_are_refused_not_a_server_error(admin_client, url):
    from agent_handshake.models import Job

    Job.objects.create(capability="compile_report", query="tea")
    response = admin_client.get(url)
    assert response.status_code == 302  # Django's answer to lookups it cannot use: the list again, with ?e=1
    assert response["Location"].endswith("?e=1")
    assert admin_client.get("/admin/agent_handshake/job/?created_at__year=2024&status=queued").status_code == 200


@pytest.mark.parametrize("view", ["change", "history", "delete"])
@pytest.mark.parametrize("model", ["job", "deskrequest"])
def test_a_nul_in_a_jobs_admin_url_is_not_found_not_a_server_error(admin_client, model, view):
    response = admin_client.get(f"/admin/agent_handshake/{model}/job%00id/{view}/")
    assert response.status_code in (302, 403)  # not found (the admin redirects with a message); no deleting jobs


def test_editing_the_profile_keeps_a_signal_changed_meanwhile(admin_client, django_capture_on_commit_callbacks):
    SiteProfile.objects.create(name="Lantern & Kettle", ai_train=False)
    form = shown_form(admin_client, CHANGE_URL)  # one editor's page

    profile = SiteProfile.objects.get()  # another editor allows AI training meanwhile
    profile.ai_train = True
    profile.save()

    form["description"] = ["Loose-leaf tea since 1920."]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(CHANGE_URL, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    profile.refresh_from_db()
    assert profile.description == "Loose-leaf tea since 1920."
    assert profile.ai_train is True
    assert admin_client.get("/.well-known/agent.json").json()["content_signals"]["ai_train"] is True


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        ({"dish": "<b>tea</b> & cake", "guests": 40}, '{"dish": "<b>tea</b> & cake", "guests": 40}'),
        (["oolong", "<i>sencha</i>"], '["oolong", "<i>sencha</i>"]'),
        (42, "42"),
        (2.5, "2.5"),
        (True, "true"),
        ("x" * 200, "x" * 79 + "…"),
    ],
)
def test_desk_list_and_page_show_any_json_message_escaped(admin_client, message, shown):
    """A site's own escalation schema may make ``message`` an object, a list or a number: the desk shows it as JSON,
    cut to 80 characters in the list, and escaped like any other text."""
    from html import unescape

    from agent_handshake.models import Job

    job = Job.objects.create(
        capability="escalate_to_human",
        query="the question as the agent put it",
        input={"message": message},
        status=Job.Status.WAITING,
        needs_operator=True,
    )
    listing = admin_client.get("/admin/agent_handshake/deskrequest/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "<b>tea" not in html  # escaped, never markup
    assert "<i>sencha" not in html
    assert shown[:80] in unescape(html)
    page = admin_client.get(f"/admin/agent_handshake/deskrequest/{quote(job.pk)}/change/")
    assert page.status_code == 200
    assert "<b>tea" not in page.content.decode()
    assert "<i>sencha" not in page.content.decode()
    full = shown if not shown.endswith("…") else "x" * 200
    assert full in unescape(page.content.decode())


def override_page(admin_client) -> tuple[ContentSignalOverride, dict[str, list[str]]]:
    """The profile with an override for articles (no AI training), and one editor's page of it."""
    profile = SiteProfile.objects.create(name="Lantern & Kettle")
    override = ContentSignalOverride.objects.create(
        profile=profile, content_type=ContentType.objects.get_for_model(Article), ai_train=False
    )
    form = shown_form(admin_client, CHANGE_URL)
    assert form["signal_overrides-0-ai_train"] == ["False"]
    return override, form


def test_editing_the_profile_keeps_an_override_changed_meanwhile(admin_client, django_capture_on_commit_callbacks):
    """An unchanged inline row is not written: not the values the page was loaded with over another editor's."""
    override, form = override_page(admin_client)
    ContentSignalOverride.objects.filter(pk=override.pk).update(ai_input=False)  # another editor, meanwhile

    form["description"] = ["Loose-leaf tea since 1920."]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(CHANGE_URL, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert SiteProfile.objects.get().description == "Loose-leaf tea since 1920."
    override.refresh_from_db()
    assert (override.ai_train, override.ai_input) == (False, False)


def test_editing_an_override_writes_only_what_the_editor_changed(admin_client, django_capture_on_commit_callbacks):
    override, form = override_page(admin_client)
    ContentSignalOverride.objects.filter(pk=override.pk).update(ai_input=False)  # another editor, meanwhile

    form["signal_overrides-0-search"] = ["False"]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(CHANGE_URL, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    before = override.updated_at
    override.refresh_from_db()
    assert (override.ai_train, override.ai_input, override.search) == (False, False, False)
    assert override.updated_at > before  # it names the new state (the state token, Last-Modified)


@pytest.mark.parametrize("job_id", ["desk_41_5Fid-x", "plain-id"])
def test_the_desk_emails_link_opens_the_request_whatever_its_id_holds(
    admin_client, mailoutbox, settings, job_id, django_capture_on_commit_callbacks
):
    """Job ids are ``token_urlsafe``: about one in fifty holds "_" and two hex digits, which the admin reads as a
    quoted character ("_41" is "A"), so the email's link, made with the raw id, opened "not found" for those."""
    import re

    from agent_handshake.concierge.jobs import run
    from agent_handshake.models import Job

    settings.AGENT_HANDSHAKE = {**settings.AGENT_HANDSHAKE, "DESK_NOTIFY_EMAILS": ["desk@example.com"]}
    Job.objects.create(
        id=job_id,
        capability="escalate_to_human",
        query="A person, please.",
        input={"message": "A person, please."},
    )
    with django_capture_on_commit_callbacks(execute=True):  # a worker puts it on the desk, and emails the operators
        assert run(job_id) == Job.Status.WAITING
    link = re.search(r"Answer it in the admin: (\S+)", mailoutbox[-1].body).group(1)
    page = admin_client.get(link)
    assert page.status_code == 200, (link, page.status_code)
    assert "A person, please." in page.content.decode()
