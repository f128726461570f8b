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


@agent_handshake.capability(
    description="Compile a report on a topic (test-only: takes input.seconds to run, then writes a Report row).",
    action_type="async",
    scope="reports",
    eta_seconds=5,
    input_schema={
        "type": "object",
        "required": ["topic"],
        "properties": {
            "topic": {"type": "string", "minLength": 1},
            "seconds": {"type": "number", "minimum": 0, "maximum": 30},
            "fail": {"type": "boolean"},
        },
    },
    output_schema={
        "type": "object",
        "required": ["topic", "words", "worker_pid"],
        "properties": {"topic": {"type": "string"}, "words": {"type": "integer"}, "worker_pid": {"type": "integer"}},
    },
)
def compile_report(invocation):
    import os
    import time

    from .models import Report

    Report.objects.create(job_id=invocation.job.pk, topic=invocation.input["topic"], worker_pid=os.getpid())
    time.sleep(invocation.input.get("seconds", 0))  # the row above is rolled back if the worker dies here
    if invocation.input.get("fail"):
        raise agent_handshake.ActionFailed("The report could not be compiled.")
    words = len(invocation.input["topic"].split())
    return agent_handshake.Outcome({"topic": invocation.input["topic"], "words": words, "worker_pid": os.getpid()})
