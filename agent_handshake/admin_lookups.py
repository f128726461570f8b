"""What the app's admin lists share: Django's change list, refusing the lookups it would turn into a 500."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest


class OddLookupsRefusedChangeList(ChangeList):
    """Django's list, refusing (``?e=1``, as for any lookup it cannot use) what it would turn into a 500: a NUL in
    a filter (PostgreSQL refuses it in text) or a date-hierarchy year past 9999."""

    def get_filters(self, request: HttpRequest) -> Any:
        if any("\x00" in value for values in self.filter_params.values() for value in values):
            raise IncorrectLookupParameters("A filter holds a NUL character.")
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:
            raise IncorrectLookupParameters(exc) from exc


class OddLookupsRefused:
    """For admins with text filters, a date hierarchy or text primary keys (jobs)."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> Any:
        return OddLookupsRefusedChangeList

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        if "\x00" in object_id:
            return None  # not found (PostgreSQL refuses a NUL in a text key: a DataError, a 500)
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]
