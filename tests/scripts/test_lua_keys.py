"""Every key a Lua script builds is one taskscale/keys.py names.

The scripts build most keys themselves, from the prefix "{ns}:" they get
as ARGV[1] (``prefix .. 'stats:' .. ttype``), so a typo there ('stat:',
'wake' without its colon) would write a key nothing else reads.  This test
reads every script with its includes expanded, finds each string
concatenation that builds a key, and checks its shape -- fixed text, and a
placeholder where a value is joined in -- against ``keys.KEY_SHAPES``, the
table every ``Keys`` member is built from.  It also checks the key names the
scripts' comments give (``{ns}:q:T:P``) and that the KEYS[i]/ARGV[i] a
script reads are in its header.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskscale.keys import KEY_SHAPES, Keys
from taskscale.luascripts import expand_includes, script_source
from taskscale.script_headers import header

SCRIPTS = Path(__file__).resolve().parents[2] / "taskscale" / "scripts"
NAMES = sorted(p.stem for p in SCRIPTS.glob("*.lua"))

#: Stands for a value joined into a key (a type, an id, a level).
HOLE = "\x00"

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>--\[(?P<eq>=*)\[.*?\](?P=eq)\]|--[^\n]*)
  | (?P<string>'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")
  | (?P<number>0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>\.\.\.|\.\.|==|~=|<=|>=|[-+*/%^#<>=(){}\[\];:,.])
    """,
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = {
    "and", "break", "do", "else", "elseif", "end", "for", "function", "if", "in",
    "local", "or", "repeat", "return", "then", "until", "while",
}  # fmt: skip
_UNARY = {"#", "-", "not"}
_TIGHTER = {"+", "-", "*", "/", "%", "^"}  # bind tighter than ".."
_BINARY = _TIGHTER | {"..", "==", "~=", "<", ">", "<=", ">=", "and", "or"}
_CLOSE = {"(": ")", "[": "]", "{": "}"}


class Tok:
    def __init__(self, kind: str, text: str) -> None:
        self.kind, self.text = kind, text

    def __repr__(self) -> str:
        return self.text


def tokens(source: str) -> list[Tok]:
    if source.startswith("#!"):  # the shebang line of a no-writes script
        source = source.split("\n", 1)[1]
    out: list[Tok] = []
    at = 0
    while at < len(source):
        m = _TOKEN.match(source, at)
        assert m, f"cannot read Lua at {source[at : at + 40]!r}"
        at = m.end()
        if m.group("comment") is not None or m.group("space") is not None:
            continue
        kind = next(k for k in ("string", "number", "name", "op") if m.group(k) is not None)
        out.append(Tok(kind, m.group(kind)))
    out.append(Tok("eof", ""))
    return out


def literal(tok: Tok) -> str | None:
    """The text of a string literal token (no escapes in key names), else None."""
    return tok.text[1:-1] if tok.kind == "string" else None


class Script:
    """One expanded script: its tokens, and what each name may hold."""

    def __init__(self, name: str, source: str | None = None) -> None:
        self.name = name
        self.toks = tokens(script_source(name) if source is None else source)
        self.header_keys = header_keys((SCRIPTS / f"{name}.lua").read_text())
        #: name -> the key shapes it may hold (a local, a parameter)
        self.shapes: dict[str, set[str]] = {}
        self._chains = self.chains()
        self.learn_names()

    # --- expressions --------------------------------------------------------------
    def close(self, i: int) -> int:
        """The index after the bracket that closes the one at ``i``."""
        depth, want = 0, _CLOSE[self.toks[i].text]
        opening = self.toks[i].text
        while True:
            t = self.toks[i].text
            if self.toks[i].kind == "op" and t == opening:
                depth += 1
            elif self.toks[i].kind == "op" and t == want:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1

    def operand(self, i: int) -> int | None:
        """The index after the operand of ".." that starts at ``i`` (None if none)."""
        toks = self.toks
        while toks[i].kind in ("op", "name") and toks[i].text in _UNARY:
            i += 1
        t = toks[i]
        if t.kind in ("string", "number") or (t.kind == "name" and t.text not in _KEYWORDS):
            i += 1  # a literal, nil/true/false, or a name
        elif t.kind == "op" and t.text in ("(", "{"):
            i = self.close(i)
        else:
            return None
        while True:  # suffixes: .x  :m(...)  [k]  (args)
            t = toks[i]
            if t.kind == "op" and t.text in (".", ":") and toks[i + 1].kind == "name":
                i += 2
            elif t.kind == "op" and t.text in ("[", "("):
                i = self.close(i)
            else:
                break
        if toks[i].kind == "op" and toks[i].text in _TIGHTER:
            return self.operand(i + 1)
        return i

    def expression(self, i: int) -> int | None:
        end = self.operand(i)
        while end is not None and self.toks[end].text in _BINARY:
            end = self.operand(end + 1)
        return end

    def starts_operand(self, i: int) -> bool:
        t, before = self.toks[i], self.toks[i - 1] if i else Tok("op", ";")
        if before.kind == "op" and before.text in {".", ":", "#", *_TIGHTER}:
            return False
        if before.kind == "name" and before.text == "not":
            return False
        called = before.kind in ("name", "string") or before.text in (")", "]")
        return not (t.kind == "op" and t.text in ("(", "[") and called)

    def chains(self) -> list[list[tuple[int, int]]]:
        """Every concatenation: the (start, end) of each of its operands."""
        found, taken = [], set()
        for i in range(len(self.toks)):
            if i in taken or not self.starts_operand(i):
                continue
            end = self.operand(i)
            if end is None or self.toks[end].text != "..":
                continue
            spans = [(i, end)]
            while self.toks[end].text == "..":
                start = end + 1
                end = self.operand(start)
                assert end is not None, f"{self.name}: cannot read the operand at {start}"
                spans.append((start, end))
            taken.update(s for s, _ in spans)
            found.append(spans)
        return found

    # --- what a name or an expression holds --------------------------------------
    def shapes_of(self, start: int, end: int) -> set[str] | None:
        """The key shapes an expression may be (None: not a key we can tell)."""
        toks = self.toks[start:end]
        if len(toks) == 1 and toks[0].kind == "name":
            if toks[0].text == "prefix":
                return {""}
            return self.shapes.get(toks[0].text)
        if [t.text for t in toks[:2]] == ["KEYS", "["] and len(toks) == 4:
            shape = self.header_keys.get(int(toks[2].text))
            return {shape} if shape is not None else None
        return None

    def chain_shapes(self, spans: list[tuple[int, int]]) -> set[str] | None:
        roots = self.shapes_of(*spans[0])
        if roots is None:
            return None
        tail = ""
        for start, end in spans[1:]:
            text = literal(self.toks[start]) if end == start + 1 else None
            tail += HOLE if text is None else text
        return {root + tail for root in roots}

    def expression_shapes(self, start: int, end: int) -> set[str] | None:
        for spans in self.chains_within(start, end):
            if spans[0][0] == start and spans[-1][1] == end:
                return self.chain_shapes(spans)
        return self.shapes_of(start, end)

    def chains_within(self, start: int, end: int) -> list[list[tuple[int, int]]]:
        return [c for c in self._chains if start <= c[0][0] and c[-1][1] <= end]

    def learn_names(self) -> None:
        """What each local and each function parameter may hold, to a fixpoint:
        ``local a, b = X, Y`` and ``a = X``; ``f(X)`` for ``local function f(a)``."""
        toks = self.toks
        params: dict[str, list[str]] = {}
        for i, t in enumerate(toks):
            if t.text == "function" and toks[i + 1].kind == "name" and toks[i + 2].text == "(":
                names = [x.text for x in toks[i + 3 : self.close(i + 2) - 1] if x.kind == "name"]
                params[toks[i + 1].text] = names
        for _ in range(4):
            for i, t in enumerate(toks):
                if t.kind == "name" and t.text in params and toks[i + 1].text == "(":
                    if toks[i - 1].text == "function":
                        continue
                    self._bind(params[t.text], *self._list(i + 2, self.close(i + 1) - 1))
                elif t.kind == "name" and (i == 0 or toks[i - 1].text not in (".", ":", ",")):
                    names, j = [t.text], i + 1
                    while toks[j].text == "," and toks[j + 1].kind == "name":
                        names.append(toks[j + 1].text)
                        j += 2
                    if toks[j].text == "=":
                        self._bind(names, *self._list(j + 1, None))

    def _list(self, start: int, stop: int | None) -> list[tuple[int, int]]:
        """The expressions of a comma-separated list from ``start``."""
        out = []
        while stop is None or start < stop:
            end = self.expression(start)
            if end is None:
                break
            out.append((start, end))
            if self.toks[end].text != ",":
                break
            start = end + 1
        return out

    def _bind(self, names: list[str], *values: tuple[int, int]) -> None:
        for name, (start, end) in zip(names, values, strict=False):
            found = self.expression_shapes(start, end)
            if found:
                self.shapes.setdefault(name, set()).update(found)


def shape_of_template(template: str) -> str:
    """A KEY_SHAPES entry with its <parts> as holes."""
    return re.sub(r"<\w+>", HOLE, template)


def shape_of_doc(name: str) -> str:
    """A key as the comments write it, "q:T:P" or "unique:<key>": the one- or
    two-capital-letter parts (T, P, W, F, S, ID) and <parts> are holes."""
    return ":".join(
        HOLE if re.fullmatch(r"[A-Z]{1,2}|<\w+>", part) else part for part in name.split(":")
    )


#: Every shape Keys builds, and the fixed text before its first hole (a
#: script may cut a key's head off to get its id: fanout_add).
SHAPES = {shape_of_template(s) for s in KEY_SHAPES.values()}
HEADS = {s.split(HOLE)[0] for s in SHAPES if HOLE in s}

#: A string that reads as part of a key name: letters and colons.
_KEYISH = re.compile(r":?[A-Za-z_]+(?::[A-Za-z_]+)*:?")


def header_keys(raw: str) -> dict[int, str]:
    """KEYS[i] -> the key shape the header comment gives it, for those named
    "{ns}:..." (the rest name keys of other queues, or templates)."""
    found = {}
    for index, name in re.findall(r"^--\s+KEYS\[(\d+)\]\s+\{(?:ns|NS)\}:(\S+)", raw, re.M):
        found[int(index)] = shape_of_doc(name)
    return found


def key_problems(name: str, source: str | None = None) -> list[str]:
    """What is wrong with the keys script ``name`` builds (``source``: its
    expanded text, when not the file's)."""
    script = Script(name, source)
    problems = []
    for spans in script._chains:
        shapes = script.chain_shapes(spans)
        text = " .. ".join(" ".join(t.text for t in script.toks[start:end]) for start, end in spans)
        if shapes is None:
            for start, end in spans:
                lit = literal(script.toks[start]) if end == start + 1 else None
                if lit and ":" in lit and _KEYISH.fullmatch(lit):
                    problems.append(f"{name}: a key built from an unknown root: {text}")
            continue
        for shape in shapes:
            if shape not in SHAPES and shape not in HEADS:
                problems.append(f"{name}: {text} builds {shape.replace(HOLE, '<>')!r}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_every_key_a_script_builds_is_one_keys_py_names(name: str) -> None:
    assert key_problems(name) == []


def test_the_check_sees_the_keys_scripts_build() -> None:
    # what the analysis resolves in a few scripts, so a blind spot shows
    claim = Script("claim")
    built = {s for c in claim._chains for s in claim.chain_shapes(c) or ()}
    assert {"q:\0:\0", "stats:\0", "wake:\0", "bucket:\0", "dead:\0"} <= built
    done = Script("fanout_close")  # fkey, a parameter of lib/fanout_done.lua
    built = {s for c in done._chains for s in done.chain_shapes(c) or ()}
    assert {"fanout:\0:done", "fanout:\0:pending", "fanout:\0:results"} <= built
    sync = Script("track_sync")
    assert sync.shapes["pods"] == {"track:pods"}
    assert sync.shapes["ikey"] == {"track:inflight:\0"}


@pytest.mark.parametrize(
    ("script", "good", "typo"),
    [
        ("complete", "prefix .. 'stats:' .. ttype", "prefix .. 'stat:' .. ttype"),
        ("claim", "prefix .. 'wake:' .. ttype", "prefix .. 'wake' .. ttype"),
        ("claim", "prefix .. 'q:' .. ttype .. ':' .. level", "prefix .. 'q:' .. ttype .. level"),
        ("reap", "prefix .. 'inflight:' .. worker", "prefix .. 'in_flight:' .. worker"),
        ("enqueue", "prefix .. 'wake:scheduler'", "prefix .. 'wake:schedulers'"),
        ("fanout_close", "fkey .. ':done'", "fkey .. ':dnoe'"),
        ("track_sync", "prefix .. 'track:pods'", "prefix .. 'track:pod'"),
    ],
)
def test_a_misspelt_key_fails_the_check(script: str, good: str, typo: str) -> None:
    text = script_source(script)
    assert good in text
    assert key_problems(script, text) == []
    assert key_problems(script, text.replace(good, typo, 1)) != [], f"{typo!r} went unnoticed"


def test_keys_members_are_built_from_the_table() -> None:
    keys = Keys("ns")
    parts = {"type": "T", "priority": 3, "name": "N", "key": "K", "scaler": "S"}
    parts |= {"worker": "W", "id": "I", "process": "P", "fanout": "F", "workflow": "T"}
    parts |= {"gate": "G", "bucket": 7}
    args = {
        "queue": ("T", 3), "schedule": ("N",), "unique": ("K",), "scaler": ("S",),
        "decisions": ("S",), "worker": ("W",), "catalog": ("W",), "inflight": ("W",),
        "cancel": ("I",), "reply": ("I",), "tracked_inflight": ("P",), "fanout": ("F",),
        "fanout_pending": ("F",), "fanout_done": ("F",), "fanout_results": ("F",),
        "workflow_held": ("T", "G"),
        "history": ("T", 7),
    }  # fmt: skip
    for member, template in KEY_SHAPES.items():
        got = getattr(keys, member)
        if callable(got):
            got = got(*args.get(member, ("T",)))
        want = "{ns}:" + re.sub(r"<(\w+)>", lambda m: str(parts[m.group(1)]), template)
        assert got == want, member
    # every key-naming member of Keys is in the table
    members = {n for n in vars(Keys) if not n.startswith("_") and n not in {"prefix", "namespace"}}
    assert members - set(KEY_SHAPES) == {"from_env", "or_env", "queues"}


def test_comments_name_keys_keys_py_has() -> None:
    wrong = []
    for path in [*SCRIPTS.glob("*.lua"), *SCRIPTS.glob("lib/*.lua")]:
        for comment in re.findall(r"--[^\n]*", path.read_text()):
            for name in re.findall(r"\{(?:ns|NS)\}:((?:<\w+>|\w+)(?::(?:<\w+>|\w+))*)", comment):
                if shape_of_doc(name) not in SHAPES:
                    wrong.append(f"{path.name}: {{ns}}:{name}")
    assert wrong == []


@pytest.mark.parametrize("name", NAMES)
def test_the_header_names_every_keys_and_argv_a_script_reads(name: str) -> None:
    raw = (SCRIPTS / f"{name}.lua").read_text()
    doc = header(name)  # the header as the manifest and docs/schema.md read it
    code = " ".join(t.text for t in tokens(expand_includes(raw)))
    for kind, slots in (("KEYS", doc.keys), ("ARGV", doc.argv)):
        fixed = {s.index for s in slots if not s.variadic}
        open_from = min((s.index for s in slots if s.variadic), default=None)
        for index in {int(i) for i in re.findall(kind + r" \[ (\d+) \]", code)}:
            covered = index in fixed or (open_from is not None and index >= open_from)
            assert covered, f"{name}.lua reads {kind}[{index}], not in its header"
