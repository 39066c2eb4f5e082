"""The lines of the records' index (`trials/index.jsonl`), read without pydantic.

A line is the harness's own: written from a record pydantic has validated, by the worker that ran
the trial, into a folder no agent reaches. Reading 100,000 of them back through pydantic cost
1.1-1.4 s of a 2.7 s scan (five model objects a line), so they are parsed as plain JSON and each
record becomes an `IndexedTrial`: an object whose attributes are the line's own dict, with the
model's defaults for the fields the line left out (shared by every record: the report only reads).

So that a line is only ever what a validated record wrote, each carries a CRC-32 of the rest of
itself (`c`): a line edited by hand, torn or garbled fails it, whatever its types, and so does one
an older harness wrote without it. Each also names the schema it was written under (`v`, a
fingerprint of the models' fields). A line that fails either, or the few shape checks left, is
not used: its record is read from its file and validated there, as is every record without a line.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from functools import cache
from types import MappingProxyType
from typing import Any

import pydantic_core
from pydantic import BaseModel, Field, TypeAdapter

from .records import BrowserCalls, JudgeRecord, PlannedTrial, Timings, Tokens, Wall

Stamp = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


class ReportedTrial(PlannedTrial):
    """The fields of a TrialRecord the report reads (the instruction, raw answer and page value
    are left on disk), so a report over 100,000 trials stays small in memory."""

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


class IndexLine(BaseModel):
    """One line of the index, as written."""

    c: str  # CRC-32 of the line after `{"c":"xxxxxxxx",`, in hex
    v: str  # the schema the record was written under (fingerprint())
    stamp: Stamp
    record: ReportedTrial
    pages: bool = False  # the trial's pages were written after its record and before this line


@cache
def fingerprint() -> str:
    """Of ReportedTrial's JSON schema and every field of it and its nested models (defaults and
    default factories included): a change to any changes it, so lines an older harness wrote are
    read from their files rather than misread."""
    fields = [f"{model.__name__}.{name}: {info!r}" for model in (ReportedTrial, Timings, Tokens, BrowserCalls, Wall, JudgeRecord)
              for name, info in model.model_fields.items()]
    schema = json.dumps([ReportedTrial.model_json_schema(), fields], sort_keys=True)
    return hashlib.sha256(schema.encode()).hexdigest()[:16]


def _frozen(value: Any) -> Any:
    """A default shared by every record that lacks the field: one no reader can change for the rest."""
    if isinstance(value, list):
        return ()
    if isinstance(value, dict):
        return MappingProxyType({})
    return value


def _indexed_class(model: type[BaseModel], nested: dict[str, type]) -> type:
    """A class whose instances take a parsed line's dict as their attributes, the model's defaults
    standing in (as class attributes) for what the line left out."""
    defaults = {}
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        defaults[name] = nested[name]() if name in nested else _frozen(info.get_default(call_default_factory=True))
    return type(f"Indexed{model.__name__}", (), {**defaults, "__slots__": ("__dict__",),
                                                   "__repr__": lambda self: f"Indexed{model.__name__}({self.__dict__!r})"})


def _empty(cls: type):
    return lambda: _wrap(cls, {})


def _wrap(cls: type, fields: dict) -> Any:  # as indexed_records does inline
    obj = object.__new__(cls)
    obj.__dict__ = fields
    return obj


IndexedTimings = _indexed_class(Timings, {})
IndexedTokens = _indexed_class(Tokens, {})
IndexedCalls = _indexed_class(BrowserCalls, {})
IndexedTrial = _indexed_class(ReportedTrial, {"timings": _empty(IndexedTimings), "tokens": _empty(IndexedTokens),
                                              "calls": _empty(IndexedCalls)})
_NESTED = {"timings": IndexedTimings, "tokens": IndexedTokens, "tokens_cli": IndexedTokens, "calls": IndexedCalls}
_WALLS = TypeAdapter(list[Wall])


_SIGNED = b'{"c":"'  # then 8 hex digits and '",': the CRC covers the line from byte 16 on


def _signed(body: str) -> str:
    """A line: `body` (the line's JSON after its first key) behind the CRC-32 of its bytes."""
    return f'{{"c":"{zlib.crc32(body.encode()):08x}",{body}'


def parse_lines(data: bytes) -> list[Any]:
    """The lines whose CRC holds, as JSON values (a torn, garbled or edited line is left out)."""
    crc = zlib.crc32
    whole = [line for line in data.split(b"\n")
             if line[:6] == _SIGNED and line[14:16] == b'",' and line[6:14] == b"%08x" % crc(line[16:])]
    try:
        return pydantic_core.from_json(b"[" + b",".join(whole) + b"]")
    except ValueError:  # only a line the harness itself wrote badly: keep the others
        out = []
        for line in whole:
            try:
                out.append(pydantic_core.from_json(line))
            except ValueError:
                continue
        return out


def indexed_records(lines: list[Any]) -> dict[str, tuple[Stamp, Any, bool]]:
    """Trial id -> (stamp, record, pages) of its last usable line. One loop with everything in
    locals: at 100,000 lines a function call or a generator per line is a tenth of a second."""
    version, new, nested = fingerprint(), object.__new__, tuple(_NESTED.items())
    out: dict[str, tuple[Stamp, Any, bool]] = {}
    for line in lines:
        if type(line) is not dict or line.get("v") != version:
            continue
        record, stamp = line.get("record"), line.get("stamp")
        # a stamp of other types never equals a file's (four ints from stat), so its length is checked here
        if (type(record) is not dict or type(trial_id := record.get("trial_id")) is not str
                or type(record.get("outcome")) is not str or type(stamp) is not list or len(stamp) != 4):
            continue
        usable = True
        for name, cls in nested:
            if (value := record.get(name)) is not None:
                if type(value) is not dict:
                    usable = False
                    break
                record[name] = obj = new(cls)
                obj.__dict__ = value
        if not usable or not _rare_fields_valid(record):
            continue
        obj = new(IndexedTrial)
        obj.__dict__ = record
        out[trial_id] = (tuple(stamp), obj, line.get("pages") is True)
    return out


def _rare_fields_valid(record: dict) -> bool:
    """The hostile runner's walls and a judged write task's verdicts, validated (few trials have them)."""
    try:
        if record.get("walls") is not None:
            record["walls"] = _WALLS.validate_python(record["walls"])
        if record.get("judge") is not None:
            record["judge"] = JudgeRecord.model_validate(record["judge"])
    except pydantic_core.ValidationError:
        return False
    return True


def line_json(stamp: Stamp, record: Any, pages: bool) -> str:
    """One line of the index for a record: a model (validated: as written by a worker), or an
    IndexedTrial read back from a line (its fields are that line's, so it is written as it was read)."""
    if isinstance(record, BaseModel):
        model = record if isinstance(record, ReportedTrial) else ReportedTrial.model_validate(record, from_attributes=True)
        body = model.model_dump_json(exclude_defaults=True)
    else:
        body = json.dumps(record.__dict__, default=_plain, separators=(",", ":"), ensure_ascii=False)
    return _signed(f'"v":"{fingerprint()}","stamp":{json.dumps(list(stamp))},"record":{body}{",\"pages\":true" if pages else ""}}}')


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    return value.__dict__


def as_model(record: Any) -> ReportedTrial:
    """A record of a scan as the model (an IndexedTrial validated again), for comparing and tests."""
    return record if isinstance(record, ReportedTrial) else ReportedTrial.model_validate(record, from_attributes=True)
