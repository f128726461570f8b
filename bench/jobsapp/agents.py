"""``bench_echo``: an async capability that does nothing, so bench_jobs.py times the job machinery alone."""

import agent_handshake


@agent_handshake.capability(
    description="Echo a text back (benchmark only: the handler returns at once).",
    action_type="async",
    eta_seconds=1,
    input_schema={"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
    output_schema={"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
)
def bench_echo(invocation):
    text = invocation.input["text"]
    return agent_handshake.Outcome({"text": text}, answer=text)
