"""A registered object saved in a transaction on another database alias is indexed when that transaction commits, as
one on ``default`` is: not at once (before its commit, when nothing is there to read yet), and not at all when it
rolls back.

The second alias is a second connection to the test database, as a site's router might give (a read-write split, a
content database): the test is transactional, so what one connection commits the other reads.
"""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connections, transaction

from agent_handshake.models import Document
from tests.testapp.models import Article

OTHER = "content"


@pytest.fixture(scope="module", autouse=True)
def other_alias():
    """The alias, there before the test case is set up (which checks the databases it names exist)."""
    connections.settings[OTHER] = dict(connections.settings["default"])
    yield OTHER
    connections[OTHER].close()
    del connections[OTHER]
    del connections.settings[OTHER]


pytestmark = pytest.mark.django_db(transaction=True, databases=["default", OTHER])


def titles() -> list[str]:
    documents = Document.objects.filter(content_type=ContentType.objects.get_for_model(Article))
    return sorted(documents.values_list("title", flat=True))


def test_a_save_in_a_transaction_on_another_alias_is_indexed_when_it_commits():
    with transaction.atomic(using=OTHER):
        article = Article.objects.using(OTHER).create(title="Elsewhere", slug="elsewhere", body="Kept apart.")
        assert titles() == []  # nothing before the commit
    # Before, the indexing ran at once (``default`` had no transaction to wait for) and found no such row yet.
    assert titles() == ["Elsewhere"]

    with transaction.atomic(using=OTHER):
        article.title = "Renamed"
        article.save(using=OTHER)
    assert titles() == ["Renamed"]

    try:
        with transaction.atomic(using=OTHER):
            article.title = "Never"
            article.save(using=OTHER)
            raise RuntimeError
    except RuntimeError:
        pass
    assert titles() == ["Renamed"]

    with transaction.atomic(using=OTHER):
        Article.objects.using(OTHER).filter(pk=article.pk).delete()
    assert titles() == []
