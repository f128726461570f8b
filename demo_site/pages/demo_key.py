"""The demo's API key (DEBUG only): every scope, and the same secret on every machine that keeps the demo's
default SECRET_KEY, so the README can show it."""

from django.conf import settings

from agent_handshake import keys
from agent_handshake.models import AgentClient, ApiKey

KEY_ID = "demo"
SALT = "lantern-and-kettle"


def demo_secret() -> str | None:
    """Create the demo key if it is missing and return its secret; None outside DEBUG."""
    if not settings.DEBUG:
        return None
    key = ApiKey.objects.filter(key_id=KEY_ID).first()
    if key is None:
        client, _ = AgentClient.objects.get_or_create(
            name="Demo agent", defaults={"description": "Created by make demo (DEBUG only). Every scope."}
        )
        key, secret = ApiKey.objects.issue(client, name="demo key", scopes=["*"], key_id=KEY_ID, salt=SALT)
        return secret
    return keys.recover_secret(key.key_id, key.salt, key.secret_hash)


def curl_examples(base: str, secret: str) -> str:
    """One curl command per demo capability."""
    post = f"curl -s -X POST {base}/agent/converse -H 'Content-Type: application/json'"
    auth = f"-H 'Authorization: Bearer {secret}'"
    structured = '"accept_types": ["application/data", "application/action-result", "text/answer"]'
    return "\n".join(
        [
            f"""  {post} -d '{{"capability": "check_inventory", "query": "Is the Dew of Yame Gyokuro in stock?", """
            f""""context": {{{structured}}}}}'""",
            f"""  {post} {auth} -d '{{"capability": "order_status", "query": "Where is order LK-10001 for """
            f"""nora.lindqvist@example.com?"}}'""",
            f"""  {post} -d '{{"capability": "custom_quote", "query": "Quote 12 x LK-TEA-0001 and 3 x """
            f"""LK-TEA-0002", "context": {{{structured}}}}}'""",
            f"""  {post} {auth} -H 'Idempotency-Key: booking-1' -d '{{"capability": "book_appointment", """
            f""""query": "Book a tasting", "context": {{"input": {{"service": "tea-tasting", "date": "YYYY-MM-DD", """
            f""""time": "11:00", "name": "Ada", "email": "ada@example.com"}}}}}}'""",
            f"""  {post} {auth} -d '{{"capability": "escalate_to_human", "query": "Can you blend a smoky tea """
            f"""for our café?"}}'   # then: curl -s {auth} {base}/agent/converse/status/<session_id>""",
        ]
    )
