"""Slot filling (agent_handshake.concierge.slot_filling): a capability's input gathered over several messages, the
question for what is still needed, and what is refused, as every front door that asks for input uses it."""

from __future__ import annotations

from agent_handshake.concierge import slot_filling
from agent_handshake.concierge.invocation import answer_input
from agent_handshake.registry import Capability

BOOKING = Capability(
    "book_table",
    "Books a table.",
    mode="MODE3",
    action_type="action",
    input_schema={
        "type": "object",
        "required": ["name", "email", "day"],
        "properties": {
            "name": {"type": "string", "title": "Your name", "description": "The name the table is booked under"},
            "email": {"type": "string", "format": "email"},
            "day": {"type": "string", "format": "date", "description": "The day"},
            "party_size": {"type": "integer", "minimum": 1, "maximum": 6},
            "seating": {"type": "string", "enum": ["inside", "terrace"]},
            "extras": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        },
    },
    output_schema={"type": "object"},
)
ADA = {"name": "Ada Lovelace", "email": "ada@example.com", "day": "2030-05-04"}


def test_an_intent_fills_what_it_states_and_the_question_asks_for_the_rest():
    filling = slot_filling.fill(BOOKING, {}, ["A table for ada@example.com on 2030-05-04"])
    assert filling.values == {"email": "ada@example.com", "day": "2030-05-04"}
    assert not filling.complete
    question = filling.question
    assert question.fields == ["name"]  # the intent is no answer: its words are not taken as the name
    assert question.answered is None
    assert question.text == "To book table, I still need: name: The name the table is booked under."
    assert question.described == ["name: The name the table is booked under"]


def test_a_plain_answer_to_a_one_field_question_fills_that_field():
    collected = {"email": "ada@example.com", "day": "2030-05-04"}
    filling = slot_filling.fill(BOOKING, collected, ["Ada Lovelace."], asked=["name"])
    assert filling.complete
    assert filling.question is None
    assert filling.values == {**collected, "name": "Ada Lovelace"}


def test_the_question_says_what_the_answer_gave_of_what_was_asked():
    filling = slot_filling.fill(BOOKING, {}, ["email: ada@example.com"], asked=["name", "email", "day"])
    assert filling.question.fields == ["name", "day"]
    assert filling.question.answered == ["email"]
    assert filling.question.text.startswith("Thank you: I have email now. To book table, I still need: name:")
    assert 'Give each value after its name, one per line or separated by ";" ("name: ...; day: ...").' in (
        filling.question.text
    )

    filling = slot_filling.fill(BOOKING, {}, ["Hello?"], asked=["name", "email", "day"])
    assert filling.question.answered == []
    assert filling.question.text.startswith("Your answer did not give what I asked for.")


def test_values_given_by_name_correct_the_text_and_what_was_collected():
    collected = {**ADA, "email": "old@example.com"}
    filling = slot_filling.fill(
        BOOKING, collected, ["email: text@example.com"], given={"email": "given@example.com"}, asked=[]
    )
    assert filling.complete
    assert filling.values == {**ADA, "email": "given@example.com"}


def test_a_refused_required_value_is_dropped_and_asked_for_again():
    filling = slot_filling.fill(BOOKING, {}, [], given={**ADA, "day": "2030-02-31"})
    assert filling.values == {"name": "Ada Lovelace", "email": "ada@example.com"}
    (refusal,) = filling.refused
    assert (refusal.path, refusal.field, refusal.value) == ("day", "day", "2030-02-31")
    assert refusal.message
    assert filling.question.fields == ["day"]
    assert filling.question.optional == []


def test_a_refused_optional_value_is_asked_for_again_and_may_then_be_left_out():
    filling = slot_filling.fill(BOOKING, {}, [], given={**ADA, "party_size": 20})
    assert "party_size" not in filling.values  # not run for a party of one where twenty were asked for
    assert [refusal.field for refusal in filling.refused] == ["party_size"]
    assert "at most 6" in filling.refused[0].message
    assert filling.question.fields == ["party_size"]
    assert filling.question.optional == ["party_size"]

    left_out = slot_filling.fill(BOOKING, filling.values, ["Never mind the party size."], asked=["party_size"])
    assert left_out.complete
    assert left_out.values == ADA


def test_a_field_refused_at_several_paths_is_asked_for_once():
    filling = slot_filling.fill(BOOKING, ADA, [], given={"extras": ["tea", "cake", "scones"]})
    assert [(refusal.path, refusal.field) for refusal in filling.refused] == [
        ("extras.1", "extras"),
        ("extras.2", "extras"),
    ]
    assert filling.refused[0].value == ["tea", "cake", "scones"]
    assert filling.values == ADA
    assert filling.question.fields == ["extras"]


def test_a_refused_answer_is_not_counted_as_given():
    collected = {"name": "Ada Lovelace", "email": "ada@example.com"}
    filling = slot_filling.fill(BOOKING, collected, ["day: 2030-02-31"], asked=["day"])
    assert filling.question.fields == ["day"]
    assert filling.question.answered == []
    assert filling.question.text.startswith("Your answer did not give what I asked for.")


def test_a_question_whose_fields_were_not_kept_asked_for_what_was_missing():
    collected = {"email": "ada@example.com", "day": "2030-05-04"}
    filling = slot_filling.fill(BOOKING, collected, ["Ada Lovelace"], asked=[])
    assert filling.complete
    assert filling.values["name"] == "Ada Lovelace"


def test_a_door_reads_the_text_its_own_way():
    def reading_tomorrow(capability, text, asked):
        found = answer_input(capability, text, asked)
        if "tomorrow" in text:
            found["day"] = "2030-05-05"
        return found

    filling = slot_filling.fill(BOOKING, {}, ["A table tomorrow for ada@example.com"], read=reading_tomorrow)
    assert filling.values == {"email": "ada@example.com", "day": "2030-05-05"}
    filling = slot_filling.fill(BOOKING, {}, ["A table tomorrow"], given={"day": "2030-06-01"}, read=reading_tomorrow)
    assert filling.values == {"day": "2030-06-01"}  # named values still come last


def test_gather_merges_without_checking():
    gathered = slot_filling.gather(BOOKING, {"name": "Ada"}, ["day: 2030-02-31"], asked=["name", "day"])
    assert gathered.values == {"name": "Ada", "day": "2030-02-31"}  # refused by fill, kept by gather
    assert gathered.asked == ["day"]  # what was still missing of what was asked
    assert gathered.answered == ["day"]
    assert slot_filling.gather(BOOKING, {}, ["email: a@example.com"]).answered is None


def test_ask_again_drops_what_the_action_refused_and_asks_for_it():
    again = slot_filling.ask_again(BOOKING, {**ADA, "party_size": 4}, ["day"])
    assert again.values == {"name": "Ada Lovelace", "email": "ada@example.com", "party_size": 4}
    assert again.question.fields == ["day"]
    again = slot_filling.ask_again(BOOKING, {**ADA, "party_size": 4}, ["party_size"])
    assert again.values == ADA
    assert again.question.fields == ["party_size"]  # nothing required is missing: the refused field itself


def test_values_of_a_type_their_field_does_not_take():
    given = {"party_size": "2", "day": 5, "name": None, "seating": "inside", "extras": ["tea"], "email": "a@b.co"}
    assert slot_filling.mistyped(BOOKING, given) == {"party_size": ["integer"], "day": ["string"], "name": ["string"]}
    assert slot_filling.mistyped(BOOKING, {"party_size": 2.0}) == {}  # 2.0 is an integer to JSON Schema
    assert slot_filling.mistyped(BOOKING, {"party_size": 2.5}) == {"party_size": ["integer"]}
    assert slot_filling.mistyped(BOOKING, {"party_size": True}) == {"party_size": ["integer"]}


def test_json_types_of_a_field():
    assert slot_filling.json_types({"type": ["string", "null"]}) == ["string", "null"]
    assert slot_filling.json_types({"enum": [1, "a", 2]}) == ["integer", "string"]
    assert slot_filling.json_types({"const": 2.5}) == ["number"]
    assert slot_filling.json_types({"description": "anything"}) == []
    assert slot_filling.type_fits(3, ["number"])
    assert not slot_filling.type_fits("3", ["number", "integer"])


def test_unknown_fields_and_labels():
    assert slot_filling.unknown_fields(BOOKING, {"zip": 1, "name": "Ada", "age": 3}) == ["age", "zip"]
    labels = slot_filling.labels(BOOKING)
    assert labels["name"] == "Your name"
    assert labels["party_size"] == "Party size"
