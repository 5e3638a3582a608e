"""A store record of any badness is skipped as corrupt, naming where it sits: an envelope cut
short, with bytes put in, of bytes that are not UTF-8, or with any part of its JSON replaced by
any value (wrong types, lone surrogates, huge or non-finite numbers, deep nesting) decodes to a
record or raises ``CorruptRecordError`` with its topic, partition and offset; never another
error, which would stop a restore. Unsigned records, the ones a forger can write.

Property tests over seeded examples (tests/adversarial.py).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flink_agents.durable.store import CorruptRecordError, RecordCodec
from tests.adversarial import corrupted_text, json_text, one_part_replaced
from tests.durable.store.test_records_codec import WHERE, sample_state

CODEC = RecordCodec()
STATE = sample_state()
KEY = STATE.key.canonical().encode()
ENVELOPE = CODEC.encode(KEY, STATE)
DOCUMENT = json.loads(ENVELOPE)


def decode(value: bytes) -> None:
    try:
        CODEC.decode(KEY, value, **WHERE)
    except CorruptRecordError as error:
        assert (error.topic, error.partition, error.offset) == ("t", 3, 42)
        assert error.reason


def test_the_sample_envelope_decodes() -> None:
    assert CODEC.decode(KEY, ENVELOPE, **WHERE) == STATE


@given(text=corrupted_text(ENVELOPE.decode()))
def test_an_envelope_cut_short_or_corrupted_is_corrupt(text: str | bytes) -> None:
    decode(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))


@given(document=one_part_replaced(DOCUMENT), ascii_only=st.booleans())
def test_an_envelope_with_any_part_replaced_is_corrupt_or_a_record(
    document: tuple[Any, Any], ascii_only: bool
) -> None:
    text = json_text(document[1]) if ascii_only else json.dumps(document[1], ensure_ascii=False)
    decode(text.encode("utf-8", "surrogatepass"))
