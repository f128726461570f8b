"""The app's admin screens: change lists that make as many queries for many rows as for a few, an editor's second key
text in a language refused instead of lost, a content gap answered on its form measured again, and lookups a change list
cannot use refused instead of turned into a 500. Everything through Django's test client, as a staff superuser, on
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from agent_handshake.models import (
    AgentClient,
    AgentRequest,
    ApiKey,
    ContentGap,
    DeskRequest,
    Document,
    Interaction,
    Job,
    ProposedField,
    RoutingExample,
    SchemaTemplate,
    SiteProfile,
    TrustedActorKey,
    VerifiedAgent,
)
from tests.admin.test_admin_screens import shown_form

pytestmark = pytest.mark.django_db

#: Every ModelAdmin of the app, as the admin site has them registered (the insights ones included).
APP_ADMINS = sorted(
    ((model, model_admin) for model, model_admin in admin.site._registry.items()
     if model._meta.app_label == "agent_handshake"),
    key=lambda pair: pair[0]._meta.model_name,
)  # fmt: skip
#: The admins whose list is not Django's change list, and what they answer instead.
OWN_LISTS = {
    SiteProfile: "a redirect to the one profile's page",
    AgentRequest: "the traffic overview, which reads only its start and end",
}


@pytest.fixture
def superuser(client) -> User:
    user = User.objects.create_superuser("root", password="pw")
    client.force_login(user)
    return user


def changelist(model: type) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


# --- 1. change lists: as many queries for twelve rows as for two ------------------------------------------------


def issued_key(name: str) -> ApiKey:
    key, _secret = ApiKey.objects.issue(AgentClient.objects.create(name=f"client {name}"), name=name)
    return key


def document(name: str) -> Document:
    return Document.objects.create(
        content_type=ContentType.objects.get_for_model(AgentClient), object_id=name, url=f"/pages/{name}/",
        path=f"/pages/{name}/", title=f"Page {name}", content_hash="0" * 64,
    )  # fmt: skip


def operator(name: str) -> User:
    return User.objects.create_user(f"operator-{name}", password="pw", first_name="Op", last_name=name)


def gap(name: str) -> ContentGap:
    now = timezone.now()
    return ContentGap.objects.create(label=f"gap {name}", count=3, first_seen=now, last_seen=now,
                                     nearest_document=document(f"near-{name}"), nearest_score=0.31)  # fmt: skip


#: One row of each model with every relation it has filled (a nullable one too), so that a change list showing a
#: related object is seen reading it.
ROWS: dict[type, Callable[[str], Any]] = {
    SiteProfile: lambda name: SiteProfile.objects.get_or_create(pk=1, defaults={"name": "Tea shop"}),
    AgentClient: lambda name: AgentClient.objects.create(name=name, contact_email=f"{name}@example.com"),
    ApiKey: issued_key,
    Document: document,
    Job: lambda name: Job.objects.create(capability="compile_report", query=name, api_key=issued_key(name)),
    DeskRequest: lambda name: DeskRequest.objects.create(
        capability="escalate_to_human",
        query=name,
        needs_operator=True,
        status=Job.Status.SUCCESS,
        operator_answer="Done.",
        answered_by=operator(name),
        api_key=issued_key(name),
    ),
    TrustedActorKey: lambda name: TrustedActorKey.objects.create(
        actor_id=f"https://{name}.example/", public_key="A" * 43, label=name
    ),
    Interaction: lambda name: Interaction.objects.create(
        interaction_id=name,
        api_key=issued_key(name),
        query_hash="0" * 64,
        intent="tea?",
        endpoint="https://shop.example/intent",
        job=Job.objects.create(capability="compile_report"),
    ),
    RoutingExample: lambda name: RoutingExample.objects.create(capability="check_inventory", text=f"any {name} left?"),
    SchemaTemplate: lambda name: SchemaTemplate.objects.create(scenario=f"scenario_{name}".replace("-", "_")),
    ProposedField: lambda name: ProposedField.objects.create(
        capability="book_appointment",
        name=f"key_{name}".replace("-", "_"),
        description="d",
        decided_by=operator(name),
        decided_at=timezone.now(),
    ),
    VerifiedAgent: lambda name: VerifiedAgent.objects.create(
        did=f"did:web:{name}.example", public_key="A" * 43, agent_id=name, key=issued_key(name)
    ),
    ContentGap: gap,
    AgentRequest: lambda name: AgentRequest.objects.create(
        at=timezone.now(),
        protocol="ahp",
        capability="",
        outcome="no_answer",
        status=200,
        latency_ms=12,
        agent_kind="anonymous",
        agent=f"bot {name}",
        question="tea?",
        gap=gap(name),
        sources=[document(f"cited-{name}").pk],
    ),
}


@pytest.mark.parametrize(("model", "model_admin"), APP_ADMINS, ids=[m._meta.model_name for m, _ in APP_ADMINS])
def test_a_change_list_makes_as_many_queries_for_twelve_rows_as_for_two(client, superuser, model, model_admin):
    """A change list showing a related object (an API key's client in its name, a desk request's operator) read it
    once per row: one more query for each row on the page."""
    assert model in ROWS, f"{model.__name__}: add a row maker, so that its change list is checked too"
    url = changelist(model)
    first = client.get(url)  # the schema templates' list makes the template of every scenario, once
    shown = first.context["cl"].result_count if "cl" in (first.context or {}) else None
    counts = []
    made = 0
    for rows in (2, 12):
        while made < rows:
            ROWS[model](f"{model._meta.model_name}-{made}")
            made += 1
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == (302 if model is SiteProfile else 200)
        if shown is not None:
            assert response.context["cl"].result_count == shown + rows  # every row made is on the page
        counts.append(len(queries))
    assert counts[0] == counts[1], "\n".join(query["sql"][:200] for query in queries.captured_queries)


def test_a_clients_page_lists_its_keys_in_as_many_queries_for_twelve_keys_as_for_two(client, superuser):
    """The keys listed on their client's page are named like the client (``ApiKey.__str__``): one query each."""
    holder = AgentClient.objects.create(name="many keys")
    url = reverse("admin:agent_handshake_agentclient_change", args=[holder.pk])
    client.get(url)
    counts = []
    for keys in (2, 12):
        while holder.keys.count() < keys:
            ApiKey.objects.issue(holder, name=f"key {holder.keys.count()}")
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200
        assert response.content.decode().count("many keys · key ") == keys
        counts.append(len(queries))
    assert counts[0] == counts[1], "\n".join(query["sql"][:200] for query in queries.captured_queries)


# --- 2. one editor's text per key and language, as the templates fold language tags --------------------------------


def template_page(client) -> tuple[SchemaTemplate, str]:
    client.get(changelist(SchemaTemplate))  # makes the template of every scenario
    row = SchemaTemplate.objects.get(scenario="book_appointment")
    return row, reverse("admin:agent_handshake_schematemplate_change", args=[row.pk])


def with_new_texts(form: dict[str, list[str]], rows: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """The change page's form as shown, its empty extra row dropped and ``rows`` added as new texts."""
    shown = int(form["texts-INITIAL_FORMS"][0])
    data = {name: values for name, values in form.items()
            if not name.startswith("texts-") or name.split("-")[1] in {str(n) for n in range(shown)}
            or not name.split("-")[1].isdigit()}  # fmt: skip
    for number, (key_name, language, text) in enumerate(rows, start=shown):
        data |= {f"texts-{number}-key_name": [key_name], f"texts-{number}-language": [language],
                 f"texts-{number}-semantic_description": [text]}  # fmt: skip
    data["texts-TOTAL_FORMS"] = [str(shown + len(rows))]
    return data


def stored_texts() -> list[tuple[str, str, str]]:
    from agent_handshake.models import SchemaKeyText

    return sorted(SchemaKeyText.objects.values_list("key_name", "language", "semantic_description"))


def published(client, language: str) -> dict[str, str]:
    response = client.get(f"/schema-templates/book_appointment?preferred_language={language}")
    assert response.status_code == 200
    return {key["key_name"]: key["semantic_description"] for key in response.json()["keys"]}


def test_a_second_text_for_a_key_in_the_same_language_is_refused_not_lost(
    client, superuser, django_capture_on_commit_callbacks
):
    """``fr`` and ``FR`` (or ``fr_CA`` and ``fr-CA``) are one language to the templates, which keep one text per
    key and language: both were stored, and the template published only the last, the first silently never."""
    row, url = template_page(client)
    version = row.version
    for first, second in (("fr", "FR"), ("fr_CA", "FR-ca"), ("de-CH", "de_ch")):
        form = with_new_texts(shown_form(client, url), [("name", first, "Le nom (premier)"),
                                                        ("name", second, "Le nom (second)")])  # fmt: skip
        response = client.post(url, form)
        assert response.status_code == 200, (first, second)  # the page again, with the error
        page = response.content.decode()
        assert "already has a text in this language" in page, (first, second)
        assert stored_texts() == []
    row.refresh_from_db()
    assert row.version == version  # nothing published

    # One stored text; a second in the same language, however written, is refused and the first is kept.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, with_new_texts(shown_form(client, url), [("name", "FR_ca", "Le nom complet.")]))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert stored_texts() == [("name", "fr-ca", "Le nom complet.")]  # kept as the templates read it
    assert published(client, "fr-CA")["name"] == "Le nom complet."
    for language in ("fr-CA", "fr_ca", " FR-CA "):
        form = with_new_texts(shown_form(client, url), [("name", language, "Autre chose.")])
        response = client.post(url, form)
        assert response.status_code == 200
        assert "already has a text in this language" in response.content.decode()
    assert stored_texts() == [("name", "fr-ca", "Le nom complet.")]
    assert published(client, "fr-CA")["name"] == "Le nom complet."

    # Other keys, other languages and the default text are not the same text.
    rows = [("name", "fr", "Le nom."), ("name", "", "The full name."), ("email", "fr-CA", "Le courriel.")]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, with_new_texts(shown_form(client, url), rows))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert len(stored_texts()) == 4


def test_texts_stored_twice_in_one_language_are_shown_as_such_until_one_is_deleted(
    client, superuser, django_capture_on_commit_callbacks
):
    """Rows stored before the tags were normalised (in code, or by the admin before; raw SQL still can): the editor
    is told, and may delete one."""
    from agent_handshake.models import SchemaKeyText

    row, url = template_page(client)
    SchemaKeyText.objects.create(template=row, key_name="name", language="fr", semantic_description="Premier.")
    second = SchemaKeyText.objects.create(template=row, key_name="name", language="x", semantic_description="Second.")
    with connection.cursor() as cursor:  # as written: the ORM would store "fr"
        cursor.execute(f"UPDATE {SchemaKeyText._meta.db_table} SET language = 'FR' WHERE id = %s", [second.pk])
    form = shown_form(client, url)
    response = client.post(url, form)
    assert response.status_code == 200
    assert "already has a text in this language" in response.content.decode()
    assert len(stored_texts()) == 2
    second = next(n for n in range(2) if form[f"texts-{n}-language"] == ["FR"])
    form[f"texts-{second}-DELETE"] = ["on"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert stored_texts() == [("name", "fr", "Premier.")]
    assert published(client, "fr")["name"] == "Premier."


# --- 3. a content gap answered on its own page is measured again, as by the action ---------------------------------


def test_a_gap_marked_answered_on_its_page_gets_its_nearest_page_measured_again(client, superuser, demo_content):
    """The status on a gap's page was saved as a plain field: the gap was answered but its nearest page (the page
    just written, for one) was not measured again, as the "Mark answered" action does and the README promises."""
    from agent_handshake.models import Passage

    passage = Passage.objects.exclude(embedding=None).select_related("document").first()
    now = timezone.now()
    answered, dismissed = (
        ContentGap.objects.create(label=label, count=3, examples=[label], first_seen=now, last_seen=now,
                                  centroid=list(passage.embedding))
        for label in ("gift cards?", "fax number?")
    )  # fmt: skip
    for gap_row, status in ((answered, "answered"), (dismissed, "dismissed")):
        url = reverse("admin:agent_handshake_contentgap_change", args=[gap_row.pk])
        form = shown_form(client, url)
        assert form["status"] == ["open"]
        # Meanwhile the hourly run adds questions to the gap: the editor's save keeps them.
        ContentGap.objects.filter(pk=gap_row.pk).update(count=9, examples=[gap_row.label, "more?"])
        response = client.post(url, {**form, "status": [status]})
        assert response.status_code == 302, response.content.decode()[:3000]
        gap_row.refresh_from_db()
        assert (gap_row.status, gap_row.count, gap_row.examples) == (status, 9, [gap_row.label, "more?"])
    assert answered.nearest_document_id == passage.document_id  # measured again, as "Mark answered" does
    assert answered.nearest_score == pytest.approx(1.0, abs=1e-3)
    assert (dismissed.nearest_document_id, dismissed.nearest_score) == (None, None)  # as "Dismiss" leaves it
    url = reverse("admin:agent_handshake_contentgap_change", args=[answered.pk])
    assert escape(passage.document.title) in client.get(url).content.decode()
    # A page saved with the status as shown does not undo a decision taken meanwhile.
    url = reverse("admin:agent_handshake_contentgap_change", args=[dismissed.pk])
    form = shown_form(client, url)
    ContentGap.objects.filter(pk=dismissed.pk).update(status="open")
    assert client.post(url, form).status_code == 302
    dismissed.refresh_from_db()
    assert dismissed.status == "open"


# --- 4. lookups a change list cannot use: Django's ?e=1, never a 500 ----------------------------------------------


def date_field(model: type) -> str:
    """The model's creation date if it has one, else its first date every row has."""
    names = [field.name for field in model._meta.concrete_fields
             if field.get_internal_type() == "DateTimeField" and not field.null]  # fmt: skip
    return "created_at" if "created_at" in names else names[0]


BAD_DATES = [
    "{field}__year=99999999999999",
    "{field}__year=0",
    "{field}__year=10000",
    "{field}__year=-1",
    "{field}__year__gte=10000",
    "{field}__year=tea",
    "{field}__date=2020-02-30",
    "{field}__date__gte=0000-01-01",
    "{field}__gte=99999-01-01",
    "{field}__lt=tea",
]


@pytest.mark.parametrize(("model", "model_admin"), APP_ADMINS, ids=[m._meta.model_name for m, _ in APP_ADMINS])
def test_a_date_lookup_a_list_cannot_use_is_refused_not_a_server_error(client, superuser, model, model_admin):
    """A year past 9999 (or before 1) in a lookup on a date of the model itself was taken, and failed when the
    query was made (OverflowError, ValueError: a 500); only a date hierarchy's year was refused."""
    ROWS[model](model._meta.model_name)
    url = changelist(model)
    field = date_field(model)
    plain = client.get(url)
    for lookup in BAD_DATES:
        query = lookup.format(field=field)
        response = client.get(f"{url}?{query}")
        if model in OWN_LISTS:  # its list reads no lookups: as without one
            assert response.status_code == plain.status_code, query
            continue
        assert response.status_code == 302, (query, response.status_code)  # Django's answer to a lookup it refuses
        assert response["Location"] == f"{url}?e=1", query
    text = next(f.name for f in model._meta.concrete_fields if f.get_internal_type() in ("CharField", "TextField"))
    response = client.get(f"{url}?{text}__regex=(")  # PostgreSQL refuses the pattern (a DataError), not Django
    if model in OWN_LISTS:
        assert response.status_code == plain.status_code
    else:
        assert response.status_code == 302
        assert response["Location"] == f"{url}?e=1"
        good = client.get(f"{url}?{field}__year={timezone.now().year}")
        assert good.status_code == 200
        assert good.context["cl"].result_count >= 1  # the lookups it can use still filter
