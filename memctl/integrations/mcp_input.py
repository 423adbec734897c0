"""What an MCP client may send: every text within its size, no NUL (docs/FORMAT.md, "Limits").

The MCP tools call `check` on their arguments before any work, so a 10 MB `near_dup` text or a
huge `recall` query is an error at once, not an hour of tokenising and embedding, and a NUL never
reaches a file (git and grep would take it for binary).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from ..errors import BadInput
from ..fsutil import FACT_LIMIT, shown

TEXT_LIMIT = 64 << 10  # one text: a query, a description, a ledger value (a ledger field's own limit)
BODY_LIMIT = FACT_LIMIT // 2  # the body of a fact (`remember`): the file must stay within FACT_LIMIT
CALL_LIMIT = FACT_LIMIT  # all the texts of one call together (`ledger_append`'s records)


def _texts(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in an argument's value, lists and objects (their keys too) included, with where it is."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(key, f"{where} (a key)")
            yield from _texts(item, f"{where}.{key}")
    elif isinstance(value, (list, tuple)):
        for number, item in enumerate(value):
            yield from _texts(item, f"{where}[{number}]")


def check(arguments: Mapping[str, Any]) -> None:
    """Refused (BadInput) when a text is over its limit, all of them over CALL_LIMIT, or one holds a NUL."""
    total = 0
    for name, value in arguments.items():
        limit = BODY_LIMIT if name == "body" else TEXT_LIMIT
        for where, text in _texts(value, name):
            size = len(text.encode("utf-8", "surrogatepass"))
            total += size
            if size > limit:
                raise BadInput(f"the argument {where} is {size} bytes; the limit is {shown(limit)} (docs/FORMAT.md, Limits)",
                               hint="send a shorter text", kind="too-big")
            if "\0" in text:
                raise BadInput(f"the argument {where} contains a NUL character", hint="remove it; memctl stores text", kind="nul")
    if total > CALL_LIMIT:
        raise BadInput(f"the arguments are {total} bytes together; the limit is {shown(CALL_LIMIT)} (docs/FORMAT.md, Limits)",
                       hint="send fewer or shorter values", kind="too-big")


_EXPECTED = {"string": "a text", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "array": "a list", "object": "an object", "null": "null"}


def _expected(schema: Mapping[str, Any]) -> str:
    """What an argument's JSON Schema accepts, in words: "an integer from 1 to 100", "a number from 0 to 1 or null"."""
    def one(option: Mapping[str, Any]) -> str:
        kind = _EXPECTED.get(option.get("type"), "a value")
        low, high = option.get("minimum"), option.get("maximum")
        if low is not None and high is not None:
            return f"{kind} from {low} to {high}"
        return kind + (f" of at least {low}" if low is not None else f" of at most {high}" if high is not None else "")

    return " or ".join(dict.fromkeys(one(option) for option in schema.get("anyOf") or [schema]))


_PYDANTIC = {"string_type": "a text", "int_type": "an integer", "int_parsing": "an integer", "float_type": "a number",
             "float_parsing": "a number", "bool_type": "true or false", "bool_parsing": "true or false",
             "list_type": "a list", "dict_type": "an object"}


def _json(value: Any) -> str:
    """A value as the client sent it (JSON's spelling: null, true, "text"), cut to 60 characters."""
    import json  # noqa: PLC0415

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def argument_error(tool: str, parameters: Mapping[str, Any], exc: Any) -> BadInput:
    """The first problem of a pydantic ValidationError on `tool`'s arguments, worded as memctl words it.

    Where it is (`records[0].topic`), what was sent, in JSON's spelling; the hint is the argument's own
    description and what it accepts (from the tool's input schema).
    """
    first = exc.errors()[0]
    loc = first.get("loc") or ("?",)
    name = str(loc[0])
    where = name + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc[1:])
    schema = parameters.get("properties", {}).get(name, {})
    if first["type"] == "missing":
        message = f"{tool}: the argument {where} is required"
    else:
        expected = _expected(schema) if len(loc) == 1 else _PYDANTIC.get(first["type"], str(first.get("msg", "")).lower())
        message = f"{tool}: the argument {where} must be {expected}, not {_json(first.get('input'))}"
    described = schema.get("description", "")
    hint = f"{name} is {_expected(schema)}" + (f": {described}" if described else "")
    return BadInput(message, hint=hint, kind="bad-argument")


_JSON_TYPES = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
               "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
               "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
               "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict), "null": lambda v: v is None}


def strictly(tool: str, parameters: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Refused (BadInput) when an argument is not one the tool takes, or not of its schema's JSON type:
    the SDK's validation would turn `"2"` or `true` into 2 and drop a misspelt argument (`kk: 3`),
    and the call would go on with something the client did not mean."""
    properties = parameters.get("properties", {})
    for name, value in arguments.items():
        if name == "_meta" and name not in properties:
            continue  # a client's metadata (the spec puts it beside `arguments`; some clients send it inside)
        schema = properties.get(name)
        if schema is None:
            known = ", ".join(properties) or "none"
            raise BadInput(f"{tool}: no argument named {name!r}", hint=f"its arguments are {known}", kind="bad-argument")
        kinds = [option.get("type") for option in schema.get("anyOf") or [schema]]
        if None in kinds or any(_JSON_TYPES.get(kind, lambda v: True)(value) for kind in kinds):
            continue
        described = schema.get("description", "")
        raise BadInput(f"{tool}: the argument {name} must be {_expected(schema)}, not {_json(value)}",
                       hint=f"{name} is {_expected(schema)}" + (f": {described}" if described else ""), kind="bad-argument")
