"""What agents see of the blog: published posts only."""

import agent_handshake

from .models import Post


@agent_handshake.register(Post)
class PostContent(agent_handshake.ContentConfig):
    content_type = "text/answer"
    schema_type = "BlogPosting"
    title_field = "title"
    summary_field = "summary"
    body_field = "body"
    published_field = "published_at"
    section = "Blog"
    section_description = "Articles on tea: origins, brewing, chemistry, history and shop news."
    order = 10
    # The markdown shows the author's name and the tags: renaming either re-indexes the posts that show it.
    follow = ("author", "tags")

    def get_queryset(self):
        return Post.published.select_related("author").prefetch_related("tags")

    def get_markdown(self, post):
        tags = ", ".join(tag.name for tag in post.tags.all())
        byline = f"By {post.author.name}" + (f" · Tags: {tags}" if tags else "")
        return f"{byline}\n\n{post.body}"
