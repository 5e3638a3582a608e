import pydantic
import pydantic_core
import pytest

from flink_agents.durable.store import (
    MAX_TRACE_BYTES,
    PICKLE_TAG,
    ActionState,
    ActionStateKey,
    CallError,
    CallResult,
    CallStatus,
    CorruptRecordError,
    PayloadError,
    PickleNotAllowedError,
    RecordCodec,
    RunInput,
    RunKey,
    UntrustedPickleError,
    canonical_json,
    decode_payload,
    encode_payload,
)
from flink_agents.durable.store import _codec as codec_module
from tests.durable.store import payload_types
from tests.durable.store.payload_types import Exploding, Opaque, Point, Reply

SECRET = b"test-secret"
WHERE = {"topic": "t", "partition": 3, "offset": 42}


def sample_state(seq: int = 0, key: str = 'user_1|a"b') -> ActionState:
    run = RunKey(agent="agent", key=key, seq=seq)
    state = ActionState(
        key=run.action("act"),
        completed=True,
        events=[{"type": "Out", "n": 1}],
        memory_updates=[{"path": "a.b", "value": [1, 2]}],
    )
    state.record_call(CallResult.pending("model-0", function="chat", args_digest="d" * 64))
    state.record_call(
        CallResult.pending("tool-1", function="tool").succeed(Reply(text="x", tokens=2))
    )
    state.record_call(
        CallResult.pending("tool-2", attempts=3, failed_attempts=2).fail(RuntimeError("boom"))
    )
    return state


def roundtrip(codec: RecordCodec, record):
    key = b"k" if isinstance(record, CallResult) else record.key.canonical().encode()
    return codec.decode(key, codec.encode(key, record), **WHERE)


@pytest.mark.parametrize("secret", [None, SECRET])
def test_every_record_kind_round_trips(secret):
    codec = RecordCodec(secret)
    state = sample_state()
    assert roundtrip(codec, state) == state
    call = CallResult.pending("c").succeed(Point(1, 2))
    back = roundtrip(codec, call)
    assert back == call
    assert back.value() == Point(1, 2)


def test_failed_attempts_are_written_as_pydantic_writes_them_and_left_out_at_zero():
    state = sample_state()
    body = codec_module._body(state)
    assert body == pydantic_core.to_json(state, inf_nan_mode="null")
    assert body.count(b'"failed_attempts"') == 1 and b'"failed_attempts":2' in body


def test_action_state_lookup_and_order():
    state = sample_state()
    assert [c.call_id for c in state.calls] == ["model-0", "tool-1", "tool-2"]
    assert state.call("tool-2").status is CallStatus.FAILED
    assert (state.call("tool-2").attempts, state.call("tool-2").failed_attempts) == (3, 2)
    assert state.call("missing") is None
    state.record_call(state.call("model-0").succeed(7))
    assert [c.call_id for c in state.calls] == ["model-0", "tool-1", "tool-2"]
    assert state.call("model-0").value() == 7
    with pytest.raises(ValueError, match="duplicate call ids"):
        ActionState(key=state.key, calls=[state.calls[0], state.calls[0]])


def test_status_and_error_must_agree():
    with pytest.raises(ValueError):
        CallResult(call_id="c", status=CallStatus.FAILED)
    with pytest.raises(ValueError):
        CallResult(call_id="c", status=CallStatus.SUCCEEDED, error=CallError(type="E", message=""))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        2.5,
        "s",
        [1, "a", None],
        {"a": {"b": [1]}},
        Reply(text="t", tokens=1),
        Point(3, 4),
    ],
)
def test_payload_keeps_its_type(value):
    payload, tag = encode_payload(value)
    back = decode_payload(payload, tag)
    assert back == value
    assert type(back) is type(value)


def test_declared_result_type_wins():
    payload, tag = encode_payload([Reply(text="a", tokens=1)])
    assert tag is None
    assert decode_payload(payload, tag) == [{"text": "a", "tokens": 1}]
    assert decode_payload(payload, tag, list[Reply]) == [Reply(text="a", tokens=1)]
    payload, tag = encode_payload(Point(1, 2))
    assert decode_payload(payload, tag, dict) == {"x": 1, "y": 2}


def test_a_declared_types_adapter_is_built_once_for_every_call(monkeypatch):
    built: list[object] = []

    def counting(result_type: object) -> pydantic.TypeAdapter[object]:
        built.append(result_type)
        return real(result_type)

    real = pydantic.TypeAdapter
    monkeypatch.setattr(pydantic, "TypeAdapter", counting)

    class Answer(pydantic.BaseModel):  # a type no earlier test declared
        text: str

    for text in ("a", "b"):
        payload, tag = encode_payload({"text": text}, Answer)
        assert decode_payload(payload, tag, Answer) == Answer(text=text)
    assert built == [Answer]


def test_type_tag_only_resolves_models_and_dataclasses():
    with pytest.raises(PayloadError, match="not a pydantic model or dataclass"):
        decode_payload({}, "os:system")
    with pytest.raises(PayloadError, match="cannot be resolved"):
        decode_payload({}, "tests.durable.store.payload_types:Nope")


def test_error_trace_is_capped_with_marker():
    error = CallError(type="E", message="m" * 10_000, trace="line\n" * 5_000 + "LAST")
    assert len(error.trace.encode()) <= MAX_TRACE_BYTES
    assert error.trace.startswith("[... truncated: 25004 bytes in total")
    assert error.trace.endswith("LAST")
    assert len(error.message.encode()) <= MAX_TRACE_BYTES
    small = CallError.from_exception(ValueError("short"))
    assert small.type == "builtins.ValueError" and "ValueError: short" in small.trace


def test_pickled_payload_refused_without_secret():
    state = sample_state()
    state.record_call(CallResult.pending("opaque").succeed(Opaque(5)))
    assert state.call("opaque").payload_type == PICKLE_TAG
    with pytest.raises(PickleNotAllowedError, match="FLINK_AGENTS_STORE_SECRET"):
        RecordCodec(None).encode(b"k", state)


def test_pickled_payload_round_trips_when_signed():
    call = CallResult.pending("opaque").succeed(Opaque(5))
    assert roundtrip(RecordCodec(SECRET), call).value() == Opaque(5)


def test_untrusted_pickle_is_never_loaded():
    payload_types.UNPICKLED.clear()
    call = CallResult.pending("x").succeed(Exploding("from-json"))
    forged = CallResult.model_validate_json(call.model_dump_json())
    with pytest.raises(UntrustedPickleError):
        forged.value()
    assert payload_types.UNPICKLED == []


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda v: v[:-3] + b"}}}", "HMAC does not match"),
        (lambda v: v[:10] + bytes([v[10] ^ 1]) + v[11:], "HMAC does not match"),
        (lambda v: v[36:], "not signed"),
        (lambda v: b"\x00\xffgarbage", "not signed"),
    ],
)
def test_tampered_signed_record_is_rejected(mutate, reason):
    payload_types.UNPICKLED.clear()
    codec = RecordCodec(SECRET)
    call = CallResult.pending("x").succeed(Exploding("tampered"))
    value = mutate(codec.encode(b"k", call))
    with pytest.raises(CorruptRecordError, match=reason) as info:
        codec.decode(b"k", value, **WHERE)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 3, 42)
    assert "offset=42" in str(info.value)
    assert payload_types.UNPICKLED == []


def test_signed_record_is_bound_to_its_key():
    codec = RecordCodec(SECRET)
    value = codec.encode(b"key-a", CallResult.pending("x"))
    with pytest.raises(CorruptRecordError, match="HMAC"):
        codec.decode(b"key-b", value, **WHERE)


def test_wrong_secret_and_missing_secret_are_rejected():
    value = RecordCodec(SECRET).encode(b"k", CallResult.pending("x"))
    with pytest.raises(CorruptRecordError, match="HMAC"):
        RecordCodec(b"other").decode(b"k", value, **WHERE)
    with pytest.raises(CorruptRecordError, match="no store secret"):
        RecordCodec(None).decode(b"k", value, **WHERE)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x80\x81", "not JSON"),
        (b"[1]", "envelope"),
        (b'{"v":1,"kind":"nope","body":{}}', "unknown record kind"),
        (b'{"v":1,"kind":["x"],"body":{}}', "unknown record kind"),
        (b'{"v":1,"kind":"call_result","body":{"call_id":"c"}}', "invalid call_result"),
    ],
)
def test_unsigned_garbage_is_rejected(value, reason):
    with pytest.raises(CorruptRecordError, match=reason):
        RecordCodec(None).decode(b"k", value, **WHERE)


def test_unsigned_record_with_pickle_or_wrong_key_is_rejected():
    call = CallResult.pending("x").succeed(Exploding("unsigned"))
    body = RecordCodec(SECRET).encode(b"k", call)[36:]
    with pytest.raises(CorruptRecordError, match="pickled payload"):
        RecordCodec(None).decode(b"k", body, **WHERE)
    state = sample_state()
    value = RecordCodec(None).encode(b"", state)
    with pytest.raises(CorruptRecordError, match="key does not match"):
        RecordCodec(None).decode(b'{"other":1}', value, **WHERE)


@pytest.mark.parametrize("secret", [None, SECRET])
def test_records_in_the_earlier_canonical_form_still_decode(secret):
    codec = RecordCodec(secret)
    state = sample_state()
    key = state.key.canonical().encode()
    old_form = canonical_json(
        {"v": 1, "kind": "action_state", "body": state.model_dump(mode="json")}
    ).encode()
    assert codec.decode(key, codec.seal(key, old_form), **WHERE) == state


def test_non_finite_floats_become_null_as_before_and_their_names_in_text_stay():
    codec = RecordCodec(None)
    for value, back in ((float("nan"), None), ({"x": [float("-inf")]}, {"x": [None]})):
        assert roundtrip(codec, CallResult.pending("c").succeed(value)).value() == back
    text = CallResult.pending("c").succeed("NaN and -Infinity")
    assert roundtrip(codec, text).value() == "NaN and -Infinity"


@pytest.mark.parametrize(
    "key", ["user_1", 'quote " and \\ backslash', "ünïcödé 北京 🙂", "tab\t nl\n nul\x00 \u2028"]
)
@pytest.mark.parametrize("event_id", [None, "e" * 32, 'odd "id"'])
def test_an_action_key_renders_as_the_canonical_json_of_its_fields(key, event_id):
    # The record key of every state ever written: it must not change by a byte.
    state_key = RunKey(agent="agent ä", key=key, seq=7).action("act/ü", event_id)
    fields = {"agent": "agent ä", "key": key, "seq": 7, "action": "act/ü"}
    if event_id is not None:
        fields["event_id"] = event_id
    assert state_key.canonical() == canonical_json(fields)


def test_a_pickled_payloads_trust_is_not_written():
    call = CallResult.pending("opaque").succeed(Opaque(5))
    forged = CallResult.model_validate_json(call.model_dump_json())
    assert forged == call  # the same text: trust is where the payload came from, not in it
    codec = RecordCodec(SECRET)
    assert codec.envelope(forged) == codec.envelope(call)
    assert codec.decode(b"k", codec.encode(b"k", forged), **WHERE).value() == Opaque(5)


def test_an_action_keys_rendering_is_neither_written_nor_compared():
    key = RunKey(agent="a", key="k", seq=1).action("act", "e" * 32)
    fresh = RunKey(agent="a", key="k", seq=1).action("act", "e" * 32)
    state = ActionState(key=key)
    before = RecordCodec().envelope(state)
    assert key.canonical() == fresh.canonical()
    assert RecordCodec().envelope(state) == before  # rendered once, not a field
    assert key == fresh and hash(key) == hash(fresh)
    assert ActionStateKey.model_validate_json(key.model_dump_json()) == key
    moved = key.model_copy(update={"seq": 2})
    assert moved.canonical() == canonical_json({**key.model_dump(), "seq": 2})


def test_records_built_without_validation_equal_the_validated_ones():
    run = RunKey(agent="a", key='"k"', seq=1)
    key = run.action("act", "e" * 32)
    assert key == ActionStateKey(agent="a", key='"k"', seq=1, action="act", event_id="e" * 32)
    assert key.model_fields_set == {"agent", "key", "seq", "action", "event_id"}
    state = ActionState.opened(key, RunInput.of({"x": 1}, 2.5))
    validated = ActionState(key=key, run_input=RunInput(value={"x": 1}, admitted_at=2.5))
    assert state == validated and state.model_fields_set == validated.model_fields_set
    started = CallResult.pending("c", function="f", args_digest="d", attempts=1, started_at=1.5)
    assert started == CallResult(
        call_id="c", status="pending", function="f", args_digest="d", attempts=1, started_at=1.5
    )
    done = started.succeed({"v": 1}, finished_at=3.0)
    copied = started.model_copy(
        update={
            "status": CallStatus.SUCCEEDED,
            "payload": {"v": 1},
            "payload_type": None,
            "error": None,
            "finished_at": 3.0,
        }
    )
    assert done.model_dump() == copied.model_dump()
    assert done.model_fields_set == copied.model_fields_set
    assert started.status == "pending" and started.finished_at is None  # not changed


def test_lone_surrogates_are_written_escaped_and_read_back_exactly():
    text = "ls: cannot access 'report-\udcff.txt'"
    state = sample_state(key=canonical_json("dir-\udcfe"))
    state.record_call(CallResult.pending("t", function="f").succeed({"out": text}))
    state.record_call(CallResult.pending("u", function="f").fail(OSError("x" * 5000 + text)))
    codec = RecordCodec(SECRET)
    key = state.key.canonical().encode("utf-8")  # the key's surrogate is escaped too
    value = codec.encode(key, state)
    assert b"\\udcff" in value and b"\\udcfe" in key
    decoded = codec.decode(key, value, **WHERE)
    assert decoded.calls[-2].value() == {"out": text}
    message = decoded.calls[-1].error.message  # capped, tail kept, surrogate and all
    assert message.endswith(text) and len(message.encode("utf-8", "surrogatepass")) <= 4096


def test_a_record_with_no_json_form_is_a_payload_error_not_a_serializer_error():
    state = sample_state()
    state.calls[0].__dict__["payload"] = object()  # not what encode_payload ever makes
    with pytest.raises(PayloadError, match="has no JSON form"):
        RecordCodec().envelope(state)


def test_a_call_error_loses_credential_shapes_however_it_is_made() -> None:
    # Made from an exception, or read back from a record an earlier version wrote unscrubbed
    # (what `store inspect` prints): the same validator scrubs both.
    echoed = "401: {'Authorization': 'Bearer abcdef1234567890'} GET /v1?key=AIzaSyA0123456789"
    made = CallError.from_exception(RuntimeError(echoed))
    read = CallError.model_validate({"type": "RuntimeError", "message": echoed, "trace": None})
    for error in (made, read):
        assert "abcdef1234567890" not in error.message and "AIzaSy" not in error.message
        assert "Bearer <redacted>" in error.message and "?key=<redacted>" in error.message
    assert made.trace is not None and "abcdef1234567890" not in made.trace
