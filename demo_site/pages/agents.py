import agent_handshake

from .models import Page


@agent_handshake.register(Page)
class PageContent(agent_handshake.ContentConfig):
    schema_type = "WebPage"
    title_field = "title"
    summary_field = "summary"
    body_field = "body"
    section = "About the shop"
    section_description = "Who we are, how to reach us, shipping, returns and the tasting room."
    order = 5
    site_info = True
