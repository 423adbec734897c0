"""Forgetting policies: the safe condition language, the shipped defaults, the config.

A condition is a small expression over named fields of one fact or episode:

    importance < 0.1 AND idle_days > 120
    event_type = "error" AND has_outcome AND NOT tags HAS "keep"

It is tokenized, parsed by recursive descent into a tree, type-checked against
the fields of its target (facts or episodes), then turned into nested closures.
Nothing is ever passed to eval: a name that is not a field (`__import__`) is an
error, and so is any character the grammar does not know. docs/LIFECYCLE.md
has the grammar, the fields and the defaults.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

from ..errors import BadInput

NUM, STR, BOOL, LIST = "number", "string", "boolean", "list"

FACT_FIELDS = {
    "importance": NUM, "confidence": NUM, "effective_confidence": NUM, "age_days": NUM,
    "idle_days": NUM, "access_count": NUM, "freshness": NUM, "type": STR, "tags": LIST,
    "expired": BOOL, "pinned": BOOL,
}
EPISODE_FIELDS = {
    "importance": NUM, "age_days": NUM, "idle_days": NUM, "access_count": NUM, "freshness": NUM,
    "type": STR, "event_type": STR, "tags": LIST, "has_outcome": BOOL,
}
FIELDS = {"facts": FACT_FIELDS, "episodes": EPISODE_FIELDS}
ACTIONS = {"facts": ("archive", "compress"), "episodes": ("tombstone", "compress")}
POLICY_KEYS = ("name", "target", "condition", "action", "grace_days", "enabled")
FORGET_KEYS = ("defaults", "max_facts", "max_episodes", "policy", "never")
NEVER_KEYS = ("types", "tags")
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


class ConditionError(Exception):
    """A condition that does not parse or type-check; `column` is 1-based."""

    def __init__(self, message: str, column: int = 0, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.column = column
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} at column {self.column}" if self.column else self.message


# ---------------------------------------------------------------- tokens

_TOKEN_RE = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op><=|>=|==|!=|<|>|=)
  | (?P<paren>[()])
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)
KEYWORDS = ("AND", "OR", "NOT", "HAS")
_UNESCAPE_RE = re.compile(r"\\(.)")


@dataclass(frozen=True)
class Token:
    kind: str  # number | string | op | paren | word | keyword | bool | end
    value: Any
    column: int


def iter_tokens(text: str) -> Iterator[Token]:
    """Tokens left to right, ending with an `end` token; lazily, so the first problem found is the leftmost."""
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            char = text[pos]
            if char in "\"'":
                raise ConditionError("unterminated string", pos + 1)
            raise ConditionError(f"unexpected character {char!r}", pos + 1)
        kind, raw = match.lastgroup, match.group()
        column = pos + 1
        pos = match.end()
        if kind == "space":
            continue
        if kind == "number":
            yield Token("number", float(raw), column)
        elif kind == "string":
            yield Token("string", _UNESCAPE_RE.sub(r"\1", raw[1:-1]), column)
        elif kind == "op":
            yield Token("op", "=" if raw == "==" else raw, column)
        elif raw.upper() in KEYWORDS:
            yield Token("keyword", raw.upper(), column)
        elif raw.lower() in ("true", "false"):
            yield Token("bool", raw.lower() == "true", column)
        else:
            yield Token(str(kind), raw, column)
    yield Token("end", None, len(text) + 1)


# ---------------------------------------------------------------- the tree

@dataclass(frozen=True)
class Field:
    name: str
    kind: str


@dataclass(frozen=True)
class Literal:
    value: Any
    kind: str


@dataclass(frozen=True)
class Compare:
    op: str  # < <= > >= = !=
    left: Field | Literal
    right: Field | Literal


@dataclass(frozen=True)
class Has:
    left: Field | Literal
    right: Field | Literal


@dataclass(frozen=True)
class Not:
    item: Any


@dataclass(frozen=True)
class And:
    items: tuple


@dataclass(frozen=True)
class Or:
    items: tuple


class _Parser:
    """Recursive descent over the tokens, checking kinds as it builds the tree."""

    def __init__(self, text: str, fields: Mapping[str, str], target: str):
        self.tokens = iter_tokens(text)
        self.current = self._next()
        self.fields = fields
        self.target = target
        self.used: list[str] = []

    def _next(self) -> Token:
        # A bad character is reported when the parser reaches it, so an
        # unknown name before it (`__import__(...)`) is what the error names.
        try:
            return next(self.tokens)
        except ConditionError as exc:
            return Token("error", exc, exc.column)

    def peek(self) -> Token:
        if self.current.kind == "error":
            raise self.current.value
        return self.current

    def take(self) -> Token:
        token = self.peek()
        if token.kind != "end":
            self.current = self._next()
        return token

    def parse(self):
        if self.peek().kind == "end":
            raise ConditionError("the condition is empty", hint="e.g. importance < 0.1 AND idle_days > 120")
        tree = self.expr()
        token = self.peek()
        if token.kind != "end":
            if token.value == ")":
                raise ConditionError("unbalanced parentheses: ')' without '('", token.column)
            raise ConditionError(f"unexpected {_shown(token)}", token.column, hint="join conditions with AND or OR")
        return tree

    def expr(self):
        return self.chain("OR", self.conjunction, Or)

    def conjunction(self):
        return self.chain("AND", self.negation, And)

    def chain(self, word: str, part: Callable[[], Any], node: type):
        """part (word part)*: OR binds loosest, then AND."""
        items = [part()]
        while self.peek().kind == "keyword" and self.peek().value == word:
            self.take()
            items.append(part())
        return items[0] if len(items) == 1 else node(tuple(items))

    def negation(self):
        if self.peek().kind == "keyword" and self.peek().value == "NOT":
            self.take()
            return Not(self.negation())
        return self.test()

    def test(self):
        token = self.peek()
        if token.kind == "paren" and token.value == "(":
            self.take()
            inner = self.expr()
            close = self.peek()
            if not (close.kind == "paren" and close.value == ")"):
                raise ConditionError(f"unbalanced parentheses: '(' at column {token.column} is not closed")
            self.take()
            return inner
        left = self.value()
        after = self.peek()
        if after.kind == "op":
            self.take()
            right = self.value()
            return self.compare(after, left, right)
        if after.kind == "keyword" and after.value == "HAS":
            self.take()
            right = self.value()
            if left.kind != LIST or right.kind != STR:
                raise ConditionError(f"HAS needs a list on the left and a string on the right, got {left.kind} HAS {right.kind}",
                                     after.column, hint='tags HAS "security"')
            return Has(left, right)
        if left.kind != BOOL:
            what = left.name if isinstance(left, Field) else repr(left.value)
            raise ConditionError(f"{what} is a {left.kind}, not a condition", token.column,
                                 hint="compare it, e.g. importance < 0.1, or tags HAS \"x\"")
        return left

    def compare(self, op: Token, left, right) -> Compare:
        if op.value in ("<", "<=", ">", ">="):
            if left.kind != NUM or right.kind != NUM:
                raise ConditionError(f"{op.value} compares numbers, got {left.kind} {op.value} {right.kind}", op.column)
        elif left.kind != right.kind or left.kind == LIST:
            raise ConditionError(f"cannot compare a {left.kind} with a {right.kind}", op.column,
                                 hint='strings are quoted: event_type = "error"')
        return Compare(op.value, left, right)

    def value(self):
        token = self.take()
        if token.kind == "number":
            return Literal(token.value, NUM)
        if token.kind == "string":
            return Literal(token.value, STR)
        if token.kind == "bool":
            return Literal(token.value, BOOL)
        if token.kind == "word":
            kind = self.fields.get(token.value)
            if kind is None:
                raise ConditionError(*self._unknown(token))
            if token.value not in self.used:
                self.used.append(token.value)
            return Field(token.value, kind)
        if token.kind == "end":
            raise ConditionError("the condition ends too early", token.column)
        if token.value == ")":
            raise ConditionError("unbalanced parentheses: ')' without a value before it", token.column)
        raise ConditionError(f"expected a field or a value, got {_shown(token)}", token.column)

    def _unknown(self, token: Token) -> tuple[str, int, str]:
        other = "episodes" if self.target == "facts" else "facts"
        if token.value in FIELDS.get(other, {}):
            return (f"field {token.value!r} applies to {other}, not {self.target}", token.column,
                    f"fields for {self.target}: " + ", ".join(self.fields))
        return (f"unknown field {token.value!r}", token.column,
                f"fields for {self.target}: " + ", ".join(self.fields) + '; strings are quoted ("error")')


def _shown(token: Token) -> str:
    if token.kind == "end":
        return "end of condition"
    if token.kind == "string":
        return f'"{token.value}"'
    return str(token.value) if token.kind != "number" else format(token.value, "g")


# ---------------------------------------------------------------- compiling

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "!=": operator.ne,
}

Values = Mapping[str, Any]


def _compile(node) -> Callable[[Values], Any]:
    """Nested closures, specialised for the common shapes (field op literal): planning runs them 100,000s of times."""
    if isinstance(node, Field):
        name = node.name
        return lambda v: v[name]
    if isinstance(node, Literal):
        value = node.value
        return lambda v: value
    if isinstance(node, Compare):
        op = _OPS[node.op]
        if isinstance(node.left, Field) and isinstance(node.right, Literal):
            name, value = node.left.name, node.right.value
            return lambda v: op(v[name], value)
        left, right = _compile(node.left), _compile(node.right)
        return lambda v: op(left(v), right(v))
    if isinstance(node, Has):
        left, right = _compile(node.left), _compile(node.right)
        return lambda v: right(v) in left(v)
    if isinstance(node, Not):
        item = _compile(node.item)
        return lambda v: not item(v)
    if isinstance(node, (And, Or)):
        parts = [_compile(i) for i in node.items]
        chained = parts[-1]
        for part in reversed(parts[:-1]):
            chained = _and(part, chained) if isinstance(node, And) else _or(part, chained)
        return chained
    raise TypeError(f"not a condition node: {node!r}")


def _and(first: Callable[[Values], Any], rest: Callable[[Values], Any]) -> Callable[[Values], Any]:
    return lambda v: first(v) and rest(v)


def _or(first: Callable[[Values], Any], rest: Callable[[Values], Any]) -> Callable[[Values], Any]:
    return lambda v: first(v) or rest(v)


@dataclass(frozen=True)
class Condition:
    text: str
    tree: Any
    fields: tuple[str, ...]  # the fields it reads, in order of first use
    test: Callable[[Values], Any] = field(compare=False, repr=False)

    def __call__(self, values: Values) -> bool:
        return bool(self.test(values))


def parse(text: str, target: str = "facts") -> Condition:
    """A condition over the fields of `target` ("facts" or "episodes"); ConditionError when bad."""
    if not isinstance(text, str):
        raise ConditionError("the condition must be a string")
    parser = _Parser(text, FIELDS[target], target)
    tree = parser.parse()
    return Condition(text, tree, tuple(parser.used), _compile(tree))


# ---------------------------------------------------------------- policies

@dataclass(frozen=True)
class Policy:
    name: str
    target: str  # facts | episodes
    condition: Condition
    action: str  # archive | compress (facts); tombstone | compress (episodes)
    grace_days: float = 0.0

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields whose values explain a match: the condition's, and idle_days for the grace period."""
        extra = ("idle_days",) if self.grace_days > 0 and "idle_days" not in self.condition.fields else ()
        return self.condition.fields + extra


@dataclass(frozen=True)
class NeverClass:
    name: str
    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rules:
    policies: tuple[Policy, ...]
    never: tuple[NeverClass, ...]
    max_facts: int = 0  # 0: no limit
    max_episodes: int = 0


# Shipped defaults (docs/LIFECYCLE.md); a [[forget.policy]] with the same name changes them.
DEFAULT_POLICIES: tuple[dict[str, Any], ...] = (
    {"name": "expired-facts", "target": "facts", "condition": "expired", "action": "archive", "grace_days": 0},
    {"name": "decayed-facts", "target": "facts", "condition": "effective_confidence < 0.2", "action": "archive", "grace_days": 30},
    {"name": "low-value-facts", "target": "facts", "condition": "importance < 0.1 AND idle_days > 120", "action": "archive", "grace_days": 30},
    {"name": "resolved-errors", "target": "episodes", "condition": 'event_type = "error" AND has_outcome AND age_days > 60',
     "action": "compress", "grace_days": 0},
    {"name": "stale-episodes", "target": "episodes", "condition": "freshness < 0.1 AND access_count < 2 AND importance < 0.5",
     "action": "tombstone", "grace_days": 90},
)
DEFAULT_NEVER: dict[str, dict[str, list[str]]] = {
    "human-feedback": {"types": ["feedback"], "tags": ["feedback", "human-feedback"]},
    "security-incident": {"types": [], "tags": ["security", "security-incident"]},
    "standing-rule": {"types": [], "tags": ["rule", "standing-rule"]},
    "money": {"types": [], "tags": ["money", "finance", "billing", "payment"]},
    "compliance": {"types": [], "tags": ["compliance", "legal"]},
}
CONFIG_WHERE = "memctl.toml"


def _bad(where: str, message: str, hint: str | None = None) -> BadInput:
    return BadInput(f"{CONFIG_WHERE} {where}: {message}", hint=hint)


def _policy_where(spec: Mapping[str, Any], number: int) -> str:
    name = spec.get("name")
    return f'[[forget.policy]] "{name}"' if isinstance(name, str) and name else f"[[forget.policy]] #{number}"


def build_policy(spec: Mapping[str, Any], number: int = 1) -> Policy:
    """One policy from its table; BadInput naming the policy when anything is wrong."""
    where = _policy_where(spec, number)
    for key in spec:
        if key not in POLICY_KEYS:
            raise _bad(where, f"unknown key {key!r}", hint=", ".join(POLICY_KEYS))
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _bad(where, "needs a name of 1-80 letters, digits, - or _", hint='name = "old-drafts"')
    target = spec.get("target")
    if target not in FIELDS:
        raise _bad(where, f"target must be facts or episodes, got {target!r}")
    action = spec.get("action")
    if action not in ACTIONS[target]:
        raise _bad(where, f"action for {target} must be {' or '.join(ACTIONS[target])}, got {action!r}")
    grace = spec.get("grace_days", 0)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace < 0:
        raise _bad(where, f"grace_days must be a number of days >= 0, got {grace!r}")
    text = spec.get("condition")
    if not isinstance(text, str):
        raise _bad(where, "needs a condition string", hint="condition = 'importance < 0.1 AND idle_days > 120'")
    try:
        condition = parse(text, target)
    except ConditionError as exc:
        raise _bad(where, f"condition {text!r}: {exc}", hint=exc.hint) from None
    return Policy(name, target, condition, action, float(grace))


def _limit(forget: Mapping[str, Any], key: str) -> int:
    value = forget.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad("[forget]", f"{key} must be a whole number >= 0 (0: no limit), got {value!r}")
    return value


def _never(forget: Mapping[str, Any]) -> tuple[NeverClass, ...]:
    classes = {name: dict(spec) for name, spec in DEFAULT_NEVER.items()}
    given = forget.get("never", {})
    if not isinstance(given, dict):
        raise _bad("[forget.never]", "must be a table of classes", hint='[forget.never.money] tags = ["money"]')
    for name, spec in given.items():
        where = f"[forget.never.{name}]"
        if not isinstance(spec, dict):
            raise _bad(where, "must be a table with types and tags")
        for key, value in spec.items():
            if key not in NEVER_KEYS:
                raise _bad(where, f"unknown key {key!r}", hint="types, tags")
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _bad(where, f"{key} must be a list of strings")
        classes[name] = {**classes.get(name, {"types": [], "tags": []}), **spec}
    return tuple(
        NeverClass(name, tuple(spec.get("types", ())), tuple(spec.get("tags", ())))
        for name, spec in classes.items()
        if spec.get("types") or spec.get("tags")
    )


def specs(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The policy tables in effect: the defaults (unless defaults = false), changed or extended by config."""
    forget = raw.get("forget", {})
    if not isinstance(forget, dict):
        raise _bad("[forget]", "must be a table")
    use_defaults = forget.get("defaults", True)
    if not isinstance(use_defaults, bool):
        raise _bad("[forget]", f"defaults must be true or false, got {use_defaults!r}")
    merged: dict[str, dict[str, Any]] = {}
    if use_defaults:
        merged = {spec["name"]: dict(spec) for spec in DEFAULT_POLICIES}
    given = forget.get("policy", [])
    if not isinstance(given, list) or not all(isinstance(p, dict) for p in given):
        raise _bad("[forget]", "policy must be an array of tables", hint="[[forget.policy]]")
    extra = []
    for number, spec in enumerate(given, 1):
        name = spec.get("name")
        if isinstance(name, str) and name in merged:
            merged[name] = {**merged[name], **spec}  # keys not given keep the default's values
        else:
            extra.append((number, dict(spec)))
    numbered = [(0, spec) for spec in merged.values()] + extra
    return [{**spec, "_number": number} for number, spec in numbered]


def load(raw: Mapping[str, Any]) -> Rules:
    """The rules of memctl.toml (its parsed dict); BadInput at the first problem, naming where it is."""
    forget = raw.get("forget", {})
    if isinstance(forget, dict):
        for key in forget:
            if key not in FORGET_KEYS:
                raise _bad("[forget]", f"unknown key {key!r}", hint=", ".join(FORGET_KEYS))
    policies = []
    seen: set[str] = set()
    for spec in specs(raw):
        number = spec.pop("_number")
        enabled = spec.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise _bad(_policy_where(spec, number), f"enabled must be true or false, got {enabled!r}")
        policy = build_policy(spec, number or 1)
        if policy.name in seen:
            raise _bad(_policy_where(spec, number), "the name is used twice")
        seen.add(policy.name)
        if enabled:
            policies.append(policy)
    return Rules(tuple(policies), _never(forget), _limit(forget, "max_facts"), _limit(forget, "max_episodes"))


def problems(raw: Mapping[str, Any]) -> list[str]:
    """Every problem in the [forget] config, one message each (for `memctl doctor`)."""
    found = []
    try:
        all_specs = specs(raw)
    except BadInput as exc:
        return [exc.one_line()]
    for spec in all_specs:
        number = spec.pop("_number")
        spec.pop("enabled", None)
        try:
            build_policy(spec, number or 1)
        except BadInput as exc:
            found.append(exc.one_line())
    try:
        load(raw)
    except BadInput as exc:
        if exc.one_line() not in found:
            found.append(exc.one_line())
    return found
