"""Saving only what an editor changed, for the change pages of rows that agents, operators and other editors write
at the same time (the site profile, agent clients and their keys, verified agents)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest


class OnlyWhatChanged:
    """A change page that writes only what the editor changed: what differs from the page they were shown (each
    field of the model carries its shown value, ``show_hidden_initial``), not from the row when they save. Writing
    the rest of the copy loaded with the form would undo what was written meanwhile: a revocation, a deactivation,
    a content signal another editor saved, the trust an agent's requests earned."""

    #: Written with every change, besides the fields the editor changed.
    always_written: tuple[str, ...] = ()

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        if field is not None and db_field.model is self.model:  # type: ignore[attr-defined]
            field.show_hidden_initial = True
        return field

    def written_fields(self, form: Any) -> list[str]:
        return list(form.changed_data)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)  # type: ignore[misc]
            return
        fields = [*self.written_fields(form), *self.always_written]
        if fields:
            obj.save(update_fields=fields)


class OnlyWhatChangedFormSet(forms.BaseInlineFormSet):
    """:class:`OnlyWhatChanged` for an inline's rows: a row the editor left as shown is not written, and a changed
    one writes only the fields changed from the page shown (the inline gives its fields their shown values with
    ``OnlyWhatChanged``), not the values the page was loaded with over another editor's change meanwhile."""

    #: Written with every change of a row, besides the fields the editor changed: its ``updated_at`` names the new
    #: state (the state token, Last-Modified).
    always_written: tuple[str, ...] = ("updated_at",)

    def save_existing(self, form: Any, obj: Any, commit: bool = True) -> Any:
        if not commit:
            return super().save_existing(form, obj, commit=commit)
        obj.save(update_fields=[*form.changed_data, *self.always_written])
        return obj
