"""MCP (Model Context Protocol) at ``POST /mcp``: the third front door (AHP Appendix D).

One module per concern: :mod:`.jsonrpc` (messages and errors), :mod:`.versions` (protocol revisions and their
envelopes), :mod:`.tools` (capabilities as tools, run through the concierge in process), :mod:`.resources` (the
site's own documents, read from the database only), :mod:`.server` (the method table) and :mod:`.views` (the
HTTP transport: a DRF view, stateless, JSON answers).
"""
