import markdown as markdown_lib
from django import template
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def markdown(text):
    # Demo content is written by the site's editors (trusted), as the admin's help texts say.
    return mark_safe(markdown_lib.markdown(text or "", extensions=["tables", "sane_lists"]))


@register.filter
def duration(seconds):
    minutes, seconds = divmod(int(seconds or 0), 60)
    return f"{minutes}:{seconds:02d}"
