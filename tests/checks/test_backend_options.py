"""System checks E019 and W009: ``ANSWER_OPTIONS`` and ``EMBEDDING_OPTIONS`` are the configured backend's options.

The backend is built with them at the first question (or the first indexing or search), so before these checks a
typo ("time_out") made every question a 500 (a TypeError), and a timeout of "30", of 0 or a negative
``max_retries`` failed there, or answered every question extractively without a word.
"""

from __future__ import annotations

import inspect
import math
from io import StringIO

import openai
import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from agent_handshake.checks.backends import check_backend_options, check_backends
from agent_handshake.checks.settings import check_settings
from agent_handshake.concierge.backends import ExtractiveAnswerer, OpenAIAnswerer
from agent_handshake.retrieval.embeddings import MiniLMEmbeddings, OpenAIEmbeddings

OPENAI_ANSWERS = "agent_handshake.concierge.backends.OpenAIAnswerer"
EXTRACTIVE = "agent_handshake.concierge.backends.ExtractiveAnswerer"
MINILM = "agent_handshake.retrieval.embeddings.MiniLMEmbeddings"
OPENAI_EMBEDDINGS = "agent_handshake.retrieval.embeddings.OpenAIEmbeddings"


def ids(messages) -> list[str]:
    return [message.id for message in messages]


def answering(options, backend=OPENAI_ANSWERS):
    return override_settings(AGENT_HANDSHAKE={"ANSWER_BACKEND": backend, "ANSWER_OPTIONS": options})


def embedding(options, backend=MINILM):
    return override_settings(AGENT_HANDSHAKE={"EMBEDDING_BACKEND": backend, "EMBEDDING_OPTIONS": options})


def check_all() -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "options",
    [
        {"timeout": "30"},
        {"timeout": 0},
        {"timeout": -5},
        {"timeout": math.inf},
        {"timeout": math.nan},
        {"timeout": True},
        {"max_retries": 1.5},
        {"max_retries": -1},
        {"max_retries": "2"},
        {"max_retries": True},
        {"max_retries": None},
        {"temperature": "0.2"},
        {"temperature": -0.5},
        {"temperature": math.nan},
        {"model": 4},
        {"model": ""},
        {"model": None},
        {"base_url": 8080},
        {"api_key": ["sk-test"]},
    ],
    ids=repr,
)
def test_e019_an_answer_option_of_the_wrong_type_or_value(options):
    (name, _), *_ = options.items()
    with answering(options):
        messages = check_backend_options()
        with pytest.raises(SystemCheckError, match=r"agent_handshake\.E019"):
            check_all()
    assert ids(messages) == ["agent_handshake.E019"], [message.msg for message in messages]
    assert messages[0].msg.startswith(f"AGENT_HANDSHAKE['ANSWER_OPTIONS'][{name!r}] is ")
    assert f"OpenAIAnswerer's {name!r} is " in messages[0].hint
    assert check_settings() == []  # E002 only sees the dict, which is one


def test_e019_an_answer_option_the_backend_does_not_take():
    """A typo is no option the constructor takes: the backend could not be built, so every question failed."""
    with pytest.raises(TypeError):
        OpenAIAnswerer(time_out=30)
    with answering({"model": "gpt-4o-mini", "time_out": 30}):
        messages = check_backend_options()
        with pytest.raises(SystemCheckError, match=r"agent_handshake\.E019"):
            check_all()
    assert ids(messages) == ["agent_handshake.E019"]
    assert "'time_out'" in messages[0].msg
    assert "OpenAIAnswerer does not take" in messages[0].msg
    assert messages[0].hint == "OpenAIAnswerer takes api_key, base_url, max_retries, model, temperature, timeout."
    with answering({1: "one"}):  # not even a name
        assert ids(check_backend_options()) == ["agent_handshake.E019"]


def test_e019_names_each_bad_option():
    with answering({"timeout": "30", "max_retries": -1, "time_out": 30}):
        messages = check_backend_options()
    assert ids(messages) == ["agent_handshake.E019"] * 3
    assert [message.msg.split(" ")[0] for message in messages] == [
        "AGENT_HANDSHAKE['ANSWER_OPTIONS']",  # has 'time_out', ...
        "AGENT_HANDSHAKE['ANSWER_OPTIONS']['max_retries']",
        "AGENT_HANDSHAKE['ANSWER_OPTIONS']['timeout']",
    ]


def test_e019_does_not_repeat_an_api_key():
    with answering({"api_key": 12345678901234}):
        messages = check_backend_options()
    assert ids(messages) == ["agent_handshake.E019"]
    assert "12345678901234" not in messages[0].msg + messages[0].hint
    assert "an int" in messages[0].msg


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"timeout": None},  # no limit (the README says so)
        {"timeout": 30},
        {"timeout": 0.5},
        {"max_retries": 0},
        {"temperature": 0},
        {"temperature": 0.7},
        {"base_url": None, "api_key": None},
        {
            "model": "llama3.1",
            "base_url": "http://localhost:11434/v1",
            "api_key": "sk-test",
            "temperature": 0.2,
            "timeout": 60.0,
            "max_retries": 5,
        },
    ],
    ids=repr,
)
def test_valid_answer_options_pass(options):
    with answering(options):
        assert check_backend_options() == []
        backend = OpenAIAnswerer(**options)  # and the backend takes them as before
    assert backend.timeout == options.get("timeout", 30.0)
    assert backend.max_retries == options.get("max_retries", 2)


def test_valid_answer_options_pass_manage_py_check(settings):
    settings.AGENT_HANDSHAKE = {
        **settings.AGENT_HANDSHAKE,
        "ANSWER_BACKEND": OPENAI_ANSWERS,
        "ANSWER_OPTIONS": {"model": "test-model", "timeout": None, "max_retries": 0},
        "EMBEDDING_OPTIONS": {"blas_threads": None},
    }
    out, err = check_all()
    assert "no issues" in out, out + err


def test_w009_answer_options_without_an_answer_backend():
    """With ANSWER_BACKEND empty the answers are extractive, built without the options: they are ignored."""
    with answering({"model": "gpt-4o-mini"}, backend=""):
        messages = check_backend_options()
        _, err = check_all()
    assert ids(messages) == ["agent_handshake.W009"]
    assert "ignored" in messages[0].msg
    assert OPENAI_ANSWERS in messages[0].hint
    assert "agent_handshake.W009" in err
    with answering({}, backend=""):
        assert check_backend_options() == []


def test_e019_the_extractive_backend_named_takes_no_options():
    with pytest.raises(TypeError):
        ExtractiveAnswerer(timeout=30)
    with answering({"timeout": 30}, backend=EXTRACTIVE):
        messages = check_backend_options()
    assert ids(messages) == ["agent_handshake.E019"]
    assert messages[0].hint == "ExtractiveAnswerer takes no options: remove ANSWER_OPTIONS."
    with answering({}, backend=EXTRACTIVE):
        assert check_backend_options() == []


@pytest.mark.parametrize("name", ["ANSWER_OPTIONS", "EMBEDDING_OPTIONS"])
@pytest.mark.parametrize("value", ["timeout=30", ["timeout", 30], None])
def test_e002_options_that_are_not_a_dict(name, value):
    backend = {"ANSWER_OPTIONS": ("ANSWER_BACKEND", OPENAI_ANSWERS), "EMBEDDING_OPTIONS": ("EMBEDDING_BACKEND", MINILM)}
    with override_settings(AGENT_HANDSHAKE=dict([backend[name], (name, value)])):
        messages = check_settings()
        assert check_backend_options() == []  # E002 says so; no crash, no second message
        with pytest.raises(SystemCheckError, match=r"agent_handshake\.E002"):
            check_all()
    assert ids(messages) == ["agent_handshake.E002"]
    assert messages[0].msg.startswith(f"AGENT_HANDSHAKE['{name}'] must be dict")


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        (MINILM, {"batch_size": 0}),
        (MINILM, {"batch_size": "32"}),
        (MINILM, {"workers": -1}),
        (MINILM, {"workers": 2.5}),
        (MINILM, {"blas_threads": "1"}),
        (MINILM, {"batch_sise": 16}),
        (MINILM, {"dimensions": 384}),  # an option of the other backend
        (OPENAI_EMBEDDINGS, {"dimensions": 0}),
        (OPENAI_EMBEDDINGS, {"dimensions": "256"}),
        (OPENAI_EMBEDDINGS, {"batch_size": 0}),
        (OPENAI_EMBEDDINGS, {"timeout": "30"}),
        (OPENAI_EMBEDDINGS, {"timeout": 0}),
        (OPENAI_EMBEDDINGS, {"max_retries": -1}),
        (OPENAI_EMBEDDINGS, {"model": ""}),
        (OPENAI_EMBEDDINGS, {"base_url": 11434}),
        (OPENAI_EMBEDDINGS, {"blas_threads": None}),
    ],
    ids=repr,
)
def test_e019_embedding_options(backend, options):
    (name, _), *_ = options.items()
    with embedding(options, backend):
        messages = check_backend_options()
        with pytest.raises(SystemCheckError, match=r"agent_handshake\.E019"):
            check_all()
    assert ids(messages) == ["agent_handshake.E019"], [message.msg for message in messages]
    assert messages[0].msg.startswith("AGENT_HANDSHAKE['EMBEDDING_OPTIONS']")
    assert repr(name) in messages[0].msg


@pytest.mark.parametrize(
    ("backend", "options"),
    [
        (MINILM, {}),
        (MINILM, {"blas_threads": None}),
        (MINILM, {"batch_size": 16, "workers": 4, "blas_threads": 2}),
        (MINILM, {"workers": None}),
        (OPENAI_EMBEDDINGS, {"model": "nomic-embed-text", "base_url": "http://localhost:11434/v1"}),
        (OPENAI_EMBEDDINGS, {"dimensions": 32, "batch_size": 8, "max_retries": 0, "timeout": 2, "api_key": "sk"}),
        (OPENAI_EMBEDDINGS, {"timeout": None, "dimensions": None}),
        (OPENAI_EMBEDDINGS, {"timeout": openai.Timeout(30, connect=5)}),  # the client takes one
    ],
    ids=repr,
)
def test_valid_embedding_options_pass(backend, options):
    with embedding(options, backend):
        assert check_backend_options() == []


DECLARING = [ExtractiveAnswerer, OpenAIAnswerer, MiniLMEmbeddings, OpenAIEmbeddings]


@pytest.mark.parametrize("backend", DECLARING, ids=lambda backend: backend.__name__)
def test_each_backend_declares_every_argument_of_its_constructor(backend):
    """The declaration is what the check reads: an argument added to a constructor, and not declared, would be
    reported as a typo; each default is a valid value of its option."""
    from agent_handshake.backend_options import accepted_options

    declared = accepted_options(backend)
    assert declared is not None
    parameters = {
        name: parameter
        for name, parameter in inspect.signature(backend.__init__).parameters.items()
        if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    }
    assert set(declared) == set(parameters)
    for name, option in declared.items():
        assert option.valid(parameters[name].default), name


class OwnAnswerer(OpenAIAnswerer):
    """A site's backend with a constructor of its own, which the declaration of its parent does not describe."""

    def __init__(self, persona: str = "", **options):
        super().__init__(**options)
        self.persona = persona


class SameAnswerer(OpenAIAnswerer):
    """A site's subclass that keeps its parent's constructor, and so its options."""


def test_a_site_backend_with_its_own_constructor_is_not_checked_by_its_parents_declaration():
    with answering({"persona": "a tea sommelier", "time_out": 30}, backend=f"{__name__}.OwnAnswerer"):
        assert check_backend_options() == []
    with answering({"time_out": 30}, backend=f"{__name__}.SameAnswerer"):
        messages = check_backend_options()
    assert ids(messages) == ["agent_handshake.E019"]
    assert "SameAnswerer does not take" in messages[0].msg


def test_a_backend_that_cannot_be_imported_is_left_to_e011_and_e012():
    settings = {
        "ANSWER_BACKEND": "agent_handshake.concierge.backends.NoSuchAnswerer",
        "ANSWER_OPTIONS": {"timeout": "30"},
        "EMBEDDING_BACKEND": "agent_handshake.retrieval.nowhere.Model",
        "EMBEDDING_OPTIONS": {"timeout": "30"},
    }
    with override_settings(AGENT_HANDSHAKE=settings):
        assert check_backend_options() == []
        assert sorted(ids(check_backends())) == ["agent_handshake.E011", "agent_handshake.E012"]
