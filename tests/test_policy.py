"""memctl.lifecycle.policy: the condition language and the [forget] config."""

from __future__ import annotations

import inspect
import re

import pytest
from hypothesis import given, settings, strategies as st

from memctl.errors import BadInput
from memctl.lifecycle import policy
from memctl.lifecycle.policy import ConditionError

FACT = {
    "importance": 0.05, "confidence": 0.7, "effective_confidence": 0.15, "age_days": 200.0, "idle_days": 130.0,
    "access_count": 1, "freshness": 0.0, "type": "project", "tags": ("ops", "draft"), "expired": False, "pinned": False,
}
EPISODE = {
    "importance": 0.3, "age_days": 75.0, "idle_days": 75.0, "access_count": 0, "freshness": 0.25,
    "type": "error", "event_type": "error", "tags": (), "has_outcome": True,
}


@pytest.mark.parametrize("text,expected", [
    ("importance < 0.1", True),
    ("importance < 0.1 AND idle_days > 120", True),
    ("importance < 0.1 AND idle_days > 130", False),
    ("idle_days >= 130 and access_count <= 1", True),
    ("effective_confidence < 0.2", True),
    ("confidence = 0.7", True),
    ("confidence == 0.7 AND access_count != 1", False),
    ('type = "project"', True),
    ("type != 'project'", False),
    ('tags HAS "draft"', True),
    ('tags HAS "Draft"', False),
    ('NOT tags HAS "security"', True),
    ("expired", False),
    ("NOT expired", True),
    ("expired = false AND pinned != true", True),
    ("expired OR importance < 0.1", True),
    # AND binds tighter than OR; NOT tighter than AND
    ("importance > 0.5 AND expired OR idle_days > 100", True),
    ("importance > 0.5 AND (expired OR idle_days > 100)", False),
    ("NOT importance > 0.5 AND idle_days > 100", True),
    ("NOT (importance < 0.5 AND idle_days > 100)", False),
    ("((importance < 1e-1))", True),
    ("-1 < importance", True),
    ("idle_days > age_days", False),
    ("true", True),
    ("FALSE OR False", False),
])
def test_fact_conditions(text, expected):
    assert policy.parse(text, "facts")(FACT) is expected


@pytest.mark.parametrize("text,expected", [
    ('event_type = "error" AND has_outcome AND age_days > 60', True),
    ('event_type = "error" AND NOT has_outcome', False),
    ("freshness < 0.1 AND access_count < 2 AND importance < 0.5", False),
    ('type = "decision" OR freshness <= 0.25', True),
])
def test_episode_conditions(text, expected):
    assert policy.parse(text, "episodes")(EPISODE) is expected


def test_fields_are_listed_in_order_of_first_use():
    condition = policy.parse('importance < 0.1 AND (tags HAS "x" OR importance > 0.9) AND NOT pinned', "facts")
    assert condition.fields == ("importance", "tags", "pinned")


@pytest.mark.parametrize("text,target,message,hint", [
    ('__import__("os").system("true")', "facts", "unknown field '__import__' at column 1",
     "fields for facts: importance, confidence, effective_confidence, age_days, idle_days, access_count, freshness, "
     'type, tags, expired, pinned; strings are quoted ("error")'),
    ("importnce < 0.1", "facts", "unknown field 'importnce' at column 1", None),
    ("(importance < 0.1 AND idle_days > 120", "facts", "unbalanced parentheses: '(' at column 1 is not closed", None),
    ("importance < 0.1)", "facts", "unbalanced parentheses: ')' without '(' at column 17", None),
    ("importance < )", "facts", "unbalanced parentheses: ')' without a value before it at column 14", None),
    ("event_type = error", "episodes", "unknown field 'error' at column 14", None),
    ('event_type = "error"', "facts", "field 'event_type' applies to episodes, not facts at column 1", None),
    ("expired", "episodes", "field 'expired' applies to facts, not episodes at column 1", None),
    ("importance", "facts", "importance is a number, not a condition at column 1", None),
    ('importance < "high"', "facts", "< compares numbers, got number < string at column 12", None),
    ("type = 1", "facts", "cannot compare a string with a number at column 6", None),
    ('tags = "x"', "facts", "cannot compare a list with a string at column 6", None),
    ('"x" HAS tags', "facts", "HAS needs a list on the left and a string on the right, got string HAS list at column 5", None),
    ("importance < 0.1 idle_days > 3", "facts", "unexpected idle_days at column 18", None),
    ("importance < 0.1 AND", "facts", "the condition ends too early at column 21", None),
    ("importance < 0.1; import os", "facts", "unexpected character ';' at column 17", None),
    ('type = "unterminated', "facts", "unterminated string at column 8", None),
    ("   ", "facts", "the condition is empty", None),
    ("a.b < 1", "facts", "unknown field 'a' at column 1", None),
])
def test_bad_conditions(text, target, message, hint):
    with pytest.raises(ConditionError) as info:
        policy.parse(text, target)
    assert str(info.value) == message
    if hint is not None:
        assert info.value.hint == hint


def test_conditions_are_never_evaluated_as_python():
    """No eval, exec or the builtin compile anywhere in the module (re.compile and _compile are fine)."""
    source = inspect.getsource(policy)
    assert re.findall(r"(?<![\w.])(?:eval|exec|compile)\(", source) == []
    assert re.findall(r"(?<![\w.])(?:eval|exec)\(", "x = eval(text)") == ["eval("]  # the check can fail


# ---------------------------------------------------------------- property: parse = the tree it prints

_NUM_FIELDS = ["importance", "confidence", "age_days", "idle_days", "access_count"]


def _atoms():
    num = st.tuples(st.sampled_from(_NUM_FIELDS), st.sampled_from(["<", "<=", ">", ">=", "=", "!="]),
                    st.integers(-5, 300).map(lambda n: n / 4))
    text = num.map(lambda t: (f"{t[0]} {t[1]} {t[2]!r}", lambda v, t=t: _PY[t[1]](v[t[0]], t[2])))
    tag = st.sampled_from(["ops", "draft", "x"]).map(lambda t: (f'tags HAS "{t}"', lambda v, t=t: t in v["tags"]))
    flag = st.sampled_from(["expired", "pinned"]).map(lambda f: (f, lambda v, f=f: v[f]))
    return st.one_of(text, tag, flag)


_PY = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
       "=": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _combine(children):
    def pair(op):
        return st.tuples(children, children).map(
            lambda ab, op=op: (f"({ab[0][0]}) {op} ({ab[1][0]})",
                               (lambda v, a=ab[0][1], b=ab[1][1]: a(v) and b(v)) if op == "AND"
                               else (lambda v, a=ab[0][1], b=ab[1][1]: a(v) or b(v))))
    negated = children.map(lambda a: (f"NOT ({a[0]})", lambda v, f=a[1]: not f(v)))
    return st.one_of(pair("AND"), pair("OR"), negated)


_values = st.fixed_dictionaries({
    **{f: st.integers(0, 1200).map(lambda n: n / 4) for f in _NUM_FIELDS},
    "effective_confidence": st.just(0.5), "freshness": st.just(0.5), "type": st.just("project"),
    "tags": st.lists(st.sampled_from(["ops", "draft", "x"]), max_size=2).map(tuple),
    "expired": st.booleans(), "pinned": st.booleans(),
})


@settings(max_examples=200, deadline=None)
@given(st.recursive(_atoms(), _combine, max_leaves=8), _values)
def test_parsed_conditions_agree_with_python(expression, values):
    text, direct = expression
    assert policy.parse(text, "facts")(values) == bool(direct(values))


# ---------------------------------------------------------------- the [forget] config

def test_shipped_defaults():
    rules = policy.load({})
    assert [(p.name, p.target, p.condition.text, p.action, p.grace_days) for p in rules.policies] == [
        ("expired-facts", "facts", "expired", "archive", 0.0),
        ("decayed-facts", "facts", "effective_confidence < 0.2", "archive", 30.0),
        ("low-value-facts", "facts", "importance < 0.1 AND idle_days > 120", "archive", 30.0),
        ("resolved-errors", "episodes", 'event_type = "error" AND has_outcome AND age_days > 60', "compress", 0.0),
        ("stale-episodes", "episodes", "freshness < 0.1 AND access_count < 2 AND importance < 0.5", "tombstone", 90.0),
    ]
    assert [(c.name, c.types, c.tags) for c in rules.never] == [
        ("human-feedback", ("feedback",), ("feedback", "human-feedback")),
        ("security-incident", (), ("security", "security-incident")),
        ("standing-rule", (), ("rule", "standing-rule")),
        ("money", (), ("money", "finance", "billing", "payment")),
        ("compliance", (), ("compliance", "legal")),
    ]
    assert (rules.max_facts, rules.max_episodes) == (0, 0)


def test_config_changes_extends_and_disables_defaults():
    raw = {"forget": {
        "max_facts": 250, "max_episodes": 5000,
        "policy": [
            {"name": "stale-episodes", "grace_days": 180},
            {"name": "expired-facts", "enabled": False},
            {"name": "old-drafts", "target": "facts", "condition": 'tags HAS "draft" AND idle_days > 30', "action": "compress"},
        ],
        "never": {"money": {"tags": ["money", "invoice"]}, "customers": {"types": ["user"]}, "compliance": {"tags": []}},
    }}
    rules = policy.load(raw)
    assert [(p.name, p.grace_days, p.action) for p in rules.policies] == [
        ("decayed-facts", 30.0, "archive"), ("low-value-facts", 30.0, "archive"), ("resolved-errors", 0.0, "compress"),
        ("stale-episodes", 180.0, "tombstone"), ("old-drafts", 0.0, "compress"),
    ]
    assert rules.policies[3].condition.text == "freshness < 0.1 AND access_count < 2 AND importance < 0.5"
    assert [(c.name, c.types, c.tags) for c in rules.never][3:] == [
        ("money", (), ("money", "invoice")), ("customers", ("user",), ()),
    ]
    assert (rules.max_facts, rules.max_episodes) == (250, 5000)


def test_defaults_can_be_turned_off():
    rules = policy.load({"forget": {"defaults": False, "policy": [
        {"name": "p", "target": "episodes", "condition": "age_days > 1", "action": "tombstone"}]}})
    assert [p.name for p in rules.policies] == ["p"]


@pytest.mark.parametrize("forget,message", [
    ({"policy": [{"name": "bad", "target": "facts", "condition": "__import__('os')", "action": "archive"}]},
     "memctl.toml [[forget.policy]] \"bad\": condition \"__import__('os')\": unknown field '__import__' at column 1"),
    ({"policy": [{"name": "typo", "target": "facts", "condition": "importnce < 0.1", "action": "archive"}]},
     "memctl.toml [[forget.policy]] \"typo\": condition 'importnce < 0.1': unknown field 'importnce' at column 1"),
    ({"policy": [{"name": "parens", "target": "facts", "condition": "(importance < 0.1", "action": "archive"}]},
     "memctl.toml [[forget.policy]] \"parens\": condition '(importance < 0.1': unbalanced parentheses: '(' at column 1 is not closed"),
    ({"policy": [{"name": "x", "target": "facts", "condition": "expired", "action": "tombstone"}]},
     "memctl.toml [[forget.policy]] \"x\": action for facts must be archive or compress, got 'tombstone'"),
    ({"policy": [{"name": "x", "target": "notes", "condition": "expired", "action": "archive"}]},
     "memctl.toml [[forget.policy]] \"x\": target must be facts or episodes, got 'notes'"),
    ({"policy": [{"name": "x", "target": "facts", "condition": "expired", "action": "archive", "grace": 3}]},
     "memctl.toml [[forget.policy]] \"x\": unknown key 'grace'"),
    ({"policy": [{"name": "x", "target": "facts", "condition": "expired", "action": "archive", "grace_days": -1}]},
     "memctl.toml [[forget.policy]] \"x\": grace_days must be a number of days >= 0, got -1"),
    ({"policy": [{"target": "facts", "condition": "expired", "action": "archive"}]},
     "memctl.toml [[forget.policy]] #1: needs a name of 1-80 letters, digits, - or _"),
    ({"policy": [{"name": "x", "target": "facts", "action": "archive"}]},
     "memctl.toml [[forget.policy]] \"x\": needs a condition string"),
    ({"policy": [{"name": "decayed-facts", "enabled": "no"}]},
     "memctl.toml [[forget.policy]] \"decayed-facts\": enabled must be true or false, got 'no'"),
    ({"max_facts": -1}, "memctl.toml [forget]: max_facts must be a whole number >= 0 (0: no limit), got -1"),
    ({"max_fact": 3}, "memctl.toml [forget]: unknown key 'max_fact'"),
    ({"never": {"money": {"tag": ["x"]}}}, "memctl.toml [forget.never.money]: unknown key 'tag'"),
])
def test_bad_config_names_the_policy(forget, message):
    with pytest.raises(BadInput) as info:
        policy.load({"forget": forget})
    assert info.value.message == message


def test_problems_lists_every_bad_policy():
    raw = {"forget": {"policy": [
        {"name": "one", "target": "facts", "condition": "nope > 1", "action": "archive"},
        {"name": "fine", "target": "facts", "condition": "expired", "action": "archive"},
        {"name": "two", "target": "episodes", "condition": "(age_days > 1", "action": "tombstone"},
    ]}}
    assert policy.problems(raw) == [
        "memctl.toml [[forget.policy]] \"one\": condition 'nope > 1': unknown field 'nope' at column 1 "
        "(hint: fields for facts: importance, confidence, effective_confidence, age_days, idle_days, access_count, "
        'freshness, type, tags, expired, pinned; strings are quoted ("error"))',
        "memctl.toml [[forget.policy]] \"two\": condition '(age_days > 1': unbalanced parentheses: '(' at column 1 is not closed",
    ]
    assert policy.problems({}) == []
