"""The lines of the records' index (`trials/index.jsonl`), read without pydantic.

A line is the harness's own: written from a record pydantic has validated, by the worker that ran
the trial, into a folder no agent reaches. Reading 100,000 of them back through pydantic cost
1.1-1.4 s of a 2.7 s scan (five model objects a line), so they are decoded by msgspec into
structs made from the same models (`IndexedTrial` from `ReportedTrial`, with its nested models):
the same fields, types and defaults, checked in C as each line is decoded (0.4 s for 100,000
lines, against 1.2 s for parsing them as plain JSON and checking their shapes in Python).

So that a line is only ever what a validated record wrote, each carries a CRC-32 of the rest of
itself (`c`): a line edited by hand, torn or garbled fails it, whatever its types, and so does one
an older harness wrote without it. Each also names the schema it was written under (`v`, a
fingerprint of the models' fields). A line that fails either, or the structs' types, is not used:
its record is read from its file and validated there, as is every record without a line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import types
import typing
import zlib
from typing import Any, Literal, get_args, get_origin

import msgspec
from pydantic import BaseModel, Field

from .records import RECORD_SCHEMA, BrowserCalls, JudgeRecord, PlannedTrial, Timings, Tokens, Wall

Stamp = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


class ReportedTrial(PlannedTrial):
    """The fields of a TrialRecord the report reads (the instruction, raw answer and page value
    are left on disk), so a report over 100,000 trials stays small in memory."""

    schema_version: int = RECORD_SCHEMA  # the report leaves out one this harness does not know (records.RecordSchema)
    experiment_id: str  # the report leaves out a record another run wrote (a file copied in)
    outcome: str
    stop_reason: str | None = None
    detail: str = ""
    answer: Any = None
    flags: list[str] = Field(default_factory=list)
    timings: Timings = Field(default_factory=Timings)
    tokens: Tokens = Field(default_factory=Tokens)
    tokens_cli: Tokens | None = None
    calls: BrowserCalls = Field(default_factory=BrowserCalls)
    walls: list[Wall] | None = None
    submissions: int | None = None
    judge: JudgeRecord | None = None
    agent_tool_calls: int | None = None
    claims_done: bool | None = None


class IndexLine(BaseModel):
    """One line of the index, as written."""

    c: str  # CRC-32 of the line after `{"c":"xxxxxxxx",`, in hex
    v: str  # the schema the record was written under (fingerprint())
    stamp: Stamp
    record: ReportedTrial
    pages: bool = False  # the trial's pages were written after its record and before this line


@functools.cache
def fingerprint() -> str:
    """Of ReportedTrial's JSON schema and every field of it and its nested models (defaults and
    default factories included): a change to any changes it, so lines an older harness wrote are
    read from their files rather than misread."""
    fields = [f"{model.__name__}.{name}: {info!r}" for model in (ReportedTrial, Timings, Tokens, BrowserCalls, Wall, JudgeRecord)
              for name, info in model.model_fields.items()]
    schema = json.dumps([ReportedTrial.model_json_schema(), fields], sort_keys=True)
    return hashlib.sha256(schema.encode()).hexdigest()[:16]


@functools.cache
def indexed_struct(model: type[BaseModel]) -> type[msgspec.Struct]:
    """A msgspec struct with the model's fields, types and defaults (nested models made structs too):
    made from the model, so the two cannot drift apart. Its defaults are what the model's are, a
    default list or dict made afresh for each record, as pydantic's default factories make them.
    What a struct could not check as pydantic does (a constraint, an alias, a validator, a type
    msgspec reads otherwise) is refused here, at import, rather than read differently."""
    decorators = model.__pydantic_decorators__
    if decorators.field_validators or decorators.model_validators or decorators.validators or model.model_config.get("extra"):
        raise TypeError(f"{model.__name__}: validators or extra= are not carried over to the index's struct")
    fields = []
    for name, info in model.model_fields.items():
        if info.metadata or info.alias or info.validation_alias:
            raise TypeError(f"{model.__name__}.{name}: constraints and aliases are not carried over to the index's struct")
        kind = _struct_type(info.annotation)
        if info.is_required():
            fields.append((name, kind))
            continue
        default = info.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            if default != type(default)():
                raise TypeError(f"{model.__name__}.{name}: only a model's own defaults can be a struct's")
            fields.append((name, kind, msgspec.field(default_factory=indexed_struct(type(default)))))
        else:  # msgspec copies an empty list or dict for each record, and refuses any other mutable default
            fields.append((name, kind, default))
    return msgspec.defstruct(f"Indexed{model.__name__}", fields, kw_only=True, omit_defaults=True)


def _struct_type(annotation: Any) -> Any:
    """An annotation of a model's field, with every model in it made a struct."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return indexed_struct(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in _SAME_IN_BOTH or (origin is Literal and all(type(a) is str for a in args)):
        return annotation
    if origin not in (list, dict, tuple, types.UnionType, typing.Union) or not args or (origin is dict and args[0] is not str):
        raise TypeError(f"{annotation!r}: a type msgspec may read otherwise than pydantic; not carried over to the index's struct")
    args = tuple(_struct_type(arg) for arg in args)
    if origin in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, args)
    return origin[args]


_SAME_IN_BOTH = (str, int, float, bool, type(None), Any)  # JSON's own types: read alike by both
IndexedTrial = indexed_struct(ReportedTrial)


class _Line(msgspec.Struct):
    c: str
    v: str
    stamp: Stamp
    record: IndexedTrial  # type: ignore[valid-type]
    pages: bool = False


_SIGNED = b'{"c":"'  # then 8 hex digits and '",': the CRC covers the line from byte 16 on
_LINES = msgspec.json.Decoder(list[_Line])
_LINE = msgspec.json.Decoder(_Line)


def _signed(body: str) -> str:
    """A line: `body` (the line's JSON after its first key) behind the CRC-32 of its bytes."""
    return f'{{"c":"{zlib.crc32(body.encode()):08x}",{body}'


def indexed_records(data: bytes) -> dict[str, tuple[Stamp, Any, bool, bytes]]:
    """Trial id -> (stamp, record, pages, the line's own bytes) of its last usable line: one whose
    CRC holds, that is one JSON object written under this schema (`v`), and whose fields have the
    model's types. The bytes let an index written again keep the line as it is (record_index.rewrite_index)."""
    crc, version = zlib.crc32, fingerprint()
    head = b'"v":"%s"' % version.encode()  # next after the CRC, as the harness writes a line
    whole = [line for line in data.split(b"\n")
             if line[:6] == _SIGNED and line[14:16] == b'",' and line[16:16 + len(head)] == head
             and line[6:14] == b"%08x" % crc(line[16:])]
    try:
        lines = _LINES.decode(b"[" + b",".join(whole) + b"]")
        # each line one object, its own CRC and schema (not a second "v" after the first, nor two
        # objects on one line, nor one object over two lines): else line by line, which refuses those
        usable = len(lines) == len(whole) and all(
            line.v == version and line.c.encode() == signed[6:14] for line, signed in zip(lines, whole))
    except (msgspec.DecodeError, RecursionError):  # only a harness bug writes such a line: keep the others
        usable = False
    if not usable:
        pairs = [(line, signed) for line, signed in zip(map(_decoded, whole), whole)
                 if line is not None and line.v == version]
        return {line.record.trial_id: (line.stamp, line.record, line.pages, signed) for line, signed in pairs}
    return {line.record.trial_id: (line.stamp, line.record, line.pages, signed) for line, signed in zip(lines, whole)}


def _decoded(signed: bytes) -> _Line | None:
    try:
        line = _LINE.decode(signed)
    except (msgspec.DecodeError, RecursionError):
        return None
    return line if line.c.encode() == signed[6:14] else None


def line_json(stamp: Stamp, record: Any, pages: bool) -> str:
    """One line of the index for a record: a model (validated: as written by a worker), or an
    IndexedTrial read back from a line."""
    if isinstance(record, BaseModel):
        model = record if isinstance(record, ReportedTrial) else ReportedTrial.model_validate(record, from_attributes=True)
        body = model.model_dump_json(exclude_defaults=True)
    else:
        body = msgspec.json.encode(record).decode()
    a, b, c, d = map(int, stamp)  # json.dumps' spelling of the four ints, without its encoder's start-up
    return _signed(f'"v":"{fingerprint()}","stamp":[{a}, {b}, {c}, {d}],"record":{body}{",\"pages\":true" if pages else ""}}}')


def as_model(record: Any) -> ReportedTrial:
    """A record of a scan as the model (an IndexedTrial validated again), for comparing and tests."""
    return record if isinstance(record, ReportedTrial) else ReportedTrial.model_validate(record, from_attributes=True)
