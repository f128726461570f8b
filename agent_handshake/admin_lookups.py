"""What the app's admin lists share: Django's change list, refusing the lookups it would turn into a 500."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import EmptyResultSet, FullResultSet, ValidationError
from django.db import DataError, transaction
from django.http import HttpRequest


class OddLookupsRefusedChangeList(ChangeList):
    """Django's list, refusing (``?e=1``, as for any lookup it cannot use) what it would turn into a 500: a NUL in
    a filter (PostgreSQL refuses it in text), a year before 1 or past 9999, in a date hierarchy or in a lookup on
    a date of the model (``created_at__year=10000``), or a value the database refuses (``name__regex=(``)."""

    def get_filters(self, request: HttpRequest) -> Any:
        if any("\x00" in value for values in self.filter_params.values() for value in values):
            raise IncorrectLookupParameters("A filter holds a NUL character.")
        try:
            return super().get_filters(request)
        except (OverflowError, ValueError) as exc:
            raise IncorrectLookupParameters(exc) from exc

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> Any:
        queryset = super().get_queryset(request, exclude_parameters)
        # Django checks a lookup's value when it filters, but a year lookup makes its date range only when the
        # query is compiled, for the count and the page, long after Django would have refused it: compiled here.
        try:
            queryset.query.get_compiler(queryset.db).as_sql()
        except (EmptyResultSet, FullResultSet):
            pass  # a query that matches nothing (or everything) is a query
        except (OverflowError, ValueError, ValidationError) as exc:
            raise IncorrectLookupParameters(exc) from exc
        return queryset

    def get_results(self, request: HttpRequest) -> None:
        # The count is the list's first query: one the database refuses (an invalid regular expression) is the
        # lookup's fault, and is rolled back to here so that the request can go on to answer ?e=1.
        try:
            with transaction.atomic(using=self.queryset.db):
                super().get_results(request)
        except DataError as exc:
            raise IncorrectLookupParameters(exc) from exc


class OddLookupsRefused:
    """For every admin of the app: its change list refuses the lookups above, and a NUL in an object's id (in a
    change, delete or history URL) is not found."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> Any:
        return OddLookupsRefusedChangeList

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        if "\x00" in object_id:
            return None  # not found (PostgreSQL refuses a NUL in a text key: a DataError, a 500)
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]
