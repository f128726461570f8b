import agent_handshake

from .models import Article


@agent_handshake.register(Article)
class ArticleContent(agent_handshake.ContentConfig):
    schema_type = "Article"
    title_field = "title"
    summary_field = "summary"
    body_field = "body"
    published_field = "published_at"
    section = "Articles"
    section_description = "Test articles."
    order = 1

    def get_queryset(self):
        return Article.objects.filter(published=True)
