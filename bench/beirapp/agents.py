import agent_handshake

from .models import BeirDocument


@agent_handshake.register(BeirDocument)
class BeirContent(agent_handshake.ContentConfig):
    title_field = "title"
    body_field = "text"
