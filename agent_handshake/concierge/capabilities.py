"""The capabilities the app itself provides, registered in the one capability registry at start-up and kept in step
with the content registry after it (a model registered or unregistered later).

- ``contact`` (MODE1): the site profile's contact details, once it has some;
- ``site_info`` (MODE2): the profile and the pages whose config says ``site_info = True``;
- ``content_search`` (MODE2): all registered content, as text or as a feed;
- ``get_<model>`` (MODE2): one per registered model whose content type is richer than text (a video, a
  product's data...), with ``accept_fallback`` so agents that only read text still get an answer.
"""

from __future__ import annotations

from .. import state
from ..registry import Capability, capability_registry, content_registry
from . import answering

PLAIN_TYPES = ("text/answer", "application/feed")
#: What people ask these for, in words that fit any site (routing reads them; IntentWeb publishes them). A site
#: that wants its own registers a capability of the same name in an ``agents`` module: it is kept instead.
#: ``content_search`` has none: its fit is the content's own (see :mod:`.routing`); generic examples of content
#: questions only took requests from the others (measured in bench/bench_routing.py).
CONTACT_EXAMPLES = (
    "How can I contact you?",
    "What is your email address?",
    "What's your phone number?",
    "What is your postal address?",
    "Where is your contact form?",
    "Where are you located?",
    "What address should I send mail to?",
    "Which channels can I use to reach you?",
    "How do I email the company?",
    "Who should I write to about a press or business enquiry?",
    "Can I call you?",
    "Where can I find you?",
    "What are your opening hours?",
    "When are you open?",
    "Can I visit you?",
    "How do I get in touch?",
)
#: ``site_info`` answers from the profile and the pages a site marks ``site_info`` (its about, shipping, returns,
#: privacy pages...), so what such pages say is asked of it too: the policies as well as who and what.
SITE_INFO_EXAMPLES = (
    "What is this site about?",
    "Who runs this website?",
    "Tell me about your company.",
    "What does this business do?",
    "How long have you been in business?",
    "Who are you?",
    "What do you offer?",
    "Give me an overview of this organisation.",
    "What is your story?",
    "Can I send something back for a refund?",
    "Do you deliver abroad?",
    "How can I pay?",
    "What do you do with my data?",
    "Who founded this business?",
    "What kind of business are you?",
    "What is your returns policy?",
    "How much is delivery, and how long does it take?",
    "Which payment methods do you accept?",
    "What is your privacy policy?",
    "Where do your products come from?",
)
CONTACT_DESCRIPTION = (
    "How to reach the business behind this site: its email address, phone number, postal or street address, where "
    "to find it, its opening hours and contact page."
)
SITE_INFO_DESCRIPTION = (
    "What this site is and who is behind it: the business or organisation, what it does, sells or offers, its "
    "history, people and values, and what its about pages say, such as its policies on shipping and delivery "
    "(times, costs), returns, payment and privacy."
)


def _has_contact() -> bool:
    return bool(state.snapshot().contact)


def builtin_capabilities() -> list[Capability]:
    """The capabilities the app offers for the content registered now: ``contact`` always, the others once a model
    is registered."""
    capabilities = [
        Capability(
            name="contact",
            description=CONTACT_DESCRIPTION,
            mode="MODE1",
            examples=CONTACT_EXAMPLES,
            response_types=["application/data", "text/answer"],
            handler=answering.contact,
            available=_has_contact,
        )
    ]
    configs = list(content_registry)
    if not configs:
        return capabilities
    about = tuple(config.label for config in configs if config.site_info)
    capabilities.append(
        Capability(
            name="site_info",
            description=SITE_INFO_DESCRIPTION,
            mode="MODE2",
            examples=SITE_INFO_EXAMPLES,
            response_types=["text/answer"],
            models=about,
            handler=answering.site_info,
        )
    )
    capabilities.append(
        Capability(
            name="content_search",
            description="Find specific content, posts or pages by topic; answers with sources.",
            mode="MODE2",
            response_types=["text/answer", "application/feed"],
            clarify=True,
            handler=answering.content_answer,
        )
    )
    for config in configs:
        if config.content_type in PLAIN_TYPES:
            continue
        meta = config.model._meta
        capabilities.append(
            Capability(
                name=config.get_capability_name(),
                description=config.capability_description or f"Retrieve a {meta.verbose_name} by title, topic or ID.",
                mode="MODE2",
                response_types=[config.content_type, "text/answer"],
                accept_fallback=True,
                models=(config.label,),
                handler=answering.content_answer,
            )
        )
    return capabilities


def register_builtin_capabilities() -> None:
    """Register the built-in capabilities, or bring them in step with the content registry after it changed.

    Called after the ``agents`` modules are imported, and again (see :func:`content_registry_changed`) whenever a
    model is registered or unregistered later: a model registered after start-up gets its ``get_<model>``
    capability, and ``site_info`` its pages, as one registered before does; an unregistered one loses them.
    Each is registered unless a site's capability took its name (that one is kept: check W007); those the app
    registered are in ``capability_registry.builtin``, and only those are changed or taken away.
    """
    wanted = {capability.name: capability for capability in builtin_capabilities()}
    ours = capability_registry.builtin

    def is_ours(capability: Capability) -> bool:
        return any(capability is own for own in ours)

    for capability in capability_registry:
        if capability.name not in wanted and is_ours(capability):
            capability_registry.unregister(capability.name)
    for name, capability in wanted.items():
        current = capability_registry.get(name)
        if current is not None and not is_ours(current):
            continue  # the site's own
        # The one registered before when it is the same (unregistering a model and registering it again changes
        # nothing), so that the list of ours does not grow with every change.
        capability = next((own for own in ours if own == capability), capability)
        if not is_ours(capability):
            ours.append(capability)
        if current is None:
            capability_registry.register(capability)
        elif current is not capability:
            capability_registry.replace(capability)  # site_info's pages changed: in its place in the documents


def content_registry_changed(**kwargs: object) -> None:
    """A receiver of ``model_registered`` and ``model_unregistered`` (connected by ``signal_handlers.connect()``)."""
    register_builtin_capabilities()
