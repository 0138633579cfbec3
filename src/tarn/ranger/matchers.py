"""Resource value matching as RangerDefaultResourceMatcher does it (Ranger 2.8.0).

RangerAbstractResourceMatcher.getMatcher() sorts each policy value into one of four matchers:
no wildcard → equals; ``abc*`` → starts-with; ``*abc`` → ends-with; anything else with ``*`` or
``?`` → wildcard (FilenameUtils.wildcardMatch). ``*`` alone (or a values list with no non-empty
value) matches any value. With ``ignoreCase`` every comparison is Java's
``regionMatches(ignoreCase=true)``, reproduced here by folding both sides with ``java_fold``;
strings are compared as Java's UTF-16 chars (``java_units``), so ``?`` matches one char.

Values holding a token (``{USER}``, or the escape character) are expanded per request by
StringTokenReplacer before matching; the matcher kind is still chosen from the raw value.
``isExcludes`` flips the result, except when the request asks for all values (``""`` or ``*``)
and the policy does not hold ``*``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

Kind = Literal["equals", "starts", "ends", "wildcard"]

# RangerRequestExprResolver: ${{expr}} is a script over the request; Java's '.' stops at line ends.
_EXPRESSION = re.compile("\\$\\{\\{[^\n\r\u0085\u2028\u2029]*?\\}\\}")


def java_units(text: str) -> str:
    """The string as Java's chars: a character beyond U+FFFF becomes its two surrogates, so that
    ``?`` matches one UTF-16 unit and case folds leave surrogates alone, as in Java."""
    if text.isascii() or max(text) <= "\uffff":
        return text
    units = []
    for c in text:
        code = ord(c) - 0x10000
        units.append(c if code < 0 else chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF)))
    return "".join(units)


def java_fold(text: str) -> str:
    """The form (in Java chars) in which two strings compare equal iff Java 17's
    ``regionMatches(true, …)`` says so.

    Java compares character by character (a surrogate pair as one): equal, or equal upper cases,
    or equal lower cases of the upper cases; that is, equal ``toLowerCase(toUpperCase(c))`` with
    single-character mappings only."""
    if text.isascii():
        return text.lower()
    if any("\ud800" <= c <= "\udfff" for c in text):  # already Java chars: pair the surrogates
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return java_units("".join(_fold_char(c) for c in text))


def java_lower(text: str) -> str:
    """Character.toLowerCase() of each char: the trie's lookup key."""
    if text.isascii():
        return text.lower()
    return "".join(_lower_char(c) for c in java_units(text))


@lru_cache(maxsize=4096)
def _lower_char(c: str) -> str:
    lower = c.lower()
    if len(lower) == 1:
        return lower
    return "i" if c == "\u0130" else c  # Java lowers 'İ' to 'i', Python to 'i̇'


@lru_cache(maxsize=4096)
def _fold_char(c: str) -> str:
    upper = c.upper()
    upper = upper if len(upper) == 1 else c  # Java has no multi-char mapping ('ß' stays 'ß')
    return _lower_char(upper)


def _option(options: Mapping[str, Any], name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else str(value).lower() == "true"  # Boolean.parseBoolean


def _char_option(options: Mapping[str, Any], name: str, default: str) -> str:
    value = options.get(name)
    return str(value)[0] if value else default


@dataclass(frozen=True)
class TokenSyntax:
    """StringTokenReplacer's delimiters (``tokenDelimiterStart`` … matcher options)."""

    start: str = "{"
    end: str = "}"
    escape: str = "\\"
    prefix: str = ""

    def has_token(self, value: str) -> bool:
        return self.escape in value or (self.start in value and self.end in value)

    def replace(self, value: str, tokens: Mapping[str, str]) -> str:
        """``{NAME}`` → ``tokens[NAME]``; unknown names stay as written; ``\\`` escapes."""
        return expand(self.parse(value), tokens)

    def parse(self, value: str) -> tuple[Segment, ...]:
        """StringTokenReplacer.replaceTokens() split once into literal text and tokens."""
        if not self.has_token(value):
            return ((value, None),)
        segments: list[Segment] = []
        text: list[str] = []
        token: list[str] | None = None
        i = 0
        while i < len(value):
            c = value[i]
            if c == self.escape:
                i += 1
                target = text if token is None else token
                if i < len(value):
                    c = value[i]
                    # the escape is kept unless it escapes itself or the delimiter that matters here
                    if c not in (self.escape, self.start if token is None else self.end):
                        target.append(self.escape)
                    target.append(c)
                else:
                    target.append(self.escape)
            elif token is None:
                if c == self.start:
                    token = []
                else:
                    text.append(c)
            elif c == self.end:
                name = "".join(token)
                written = f"{self.start}{name}{self.end}"
                if name.startswith(self.prefix):
                    segments += [("".join(text), None), (written, name[len(self.prefix) :])]
                    text = []
                else:
                    text.append(written)
                token = None
            else:
                token.append(c)
            i += 1
        if token is not None:  # no closing delimiter
            text.append(self.start + "".join(token))
        segments.append(("".join(text), None))
        return tuple((t, name) for t, name in segments if t)


# A value as StringTokenReplacer sees it: (text, None) is literal; (text, NAME) is a token,
# replaced by the request's NAME or else left as its written text.
Segment = tuple[str, str | None]


def expand(segments: tuple[Segment, ...], tokens: Mapping[str, str]) -> str:
    return "".join(text if name is None else tokens.get(name, text) for text, name in segments)


@dataclass(frozen=True)
class MatcherOptions:
    """The resource definition's ``matcherOptions``, with RangerAbstractResourceMatcher's defaults."""

    ignore_case: bool = True
    wildcard: bool = True
    tokens: TokenSyntax | None = TokenSyntax()  # None: replaceTokens off
    expressions: bool = True  # replaceReqExpressions
    trie_specials: str = "*?{}\\$"  # where RangerResourceTrie ends a value's literal prefix

    @classmethod
    def from_json(cls, options: Mapping[str, Any] | None) -> MatcherOptions:
        options = options or {}
        if _option(options, "quotedCaseSensitive", False):
            raise ValueError("matcher option quotedCaseSensitive=true is not supported")
        wildcard = _option(options, "wildCard", True)
        expressions = _option(options, "replaceReqExpressions", True)
        tokens: TokenSyntax | None = None
        specials = "*?" if wildcard else ""
        if _option(options, "replaceTokens", True):
            tokens = TokenSyntax(
                start=_char_option(options, "tokenDelimiterStart", "{"),
                end=_char_option(options, "tokenDelimiterEnd", "}"),
                escape=_char_option(options, "tokenDelimiterEscape", "\\"),
                prefix=str(options.get("tokenDelimiterPrefix") or ""),
            )
            specials += tokens.start + tokens.end + tokens.escape  # the trie ignores a clash
            clash = tokens.escape in (tokens.start, tokens.end) or any(
                c in tokens.prefix for c in (tokens.escape, tokens.start, tokens.end)
            )
            if clash:  # Ranger logs "Token replacement disabled" and goes on without it
                tokens = None
        return cls(
            ignore_case=_option(options, "ignoreCase", True),
            wildcard=wildcard,
            tokens=tokens,
            expressions=expressions,
            trie_specials=specials + ("$" if expressions else ""),
        )

    def fold(self, text: str) -> str:
        """``text`` as compared: Java chars, folded when the resource ignores case."""
        return java_fold(text) if self.ignore_case else java_units(text)

    def lookup(self, text: str) -> str:
        """``text`` as the trie's children are keyed."""
        return java_lower(text) if self.ignore_case else java_units(text)


@lru_cache(maxsize=1024)
def _wildcard_regex(pattern: str) -> re.Pattern[str]:
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.DOTALL)


@dataclass(frozen=True)
class ValueMatcher:
    """One policy value. ``text`` is folded already unless it holds tokens."""

    kind: Kind
    text: str  # as compared (Java chars, folded when ignoring case); as written when it holds tokens
    segments: tuple[Segment, ...] | None  # the tokens, parsed
    ignore_case: bool

    def matches(self, probe: str, tokens: Mapping[str, str]) -> bool:
        """``probe``: the requested value, folded when the resource ignores case."""
        text = self.text
        if self.segments is not None:
            text = expand(self.segments, tokens)
            text = java_fold(text) if self.ignore_case else java_units(text)
        if self.kind == "equals":
            return probe == text
        if self.kind == "starts":
            return probe.startswith(text)
        if self.kind == "ends":
            return probe.endswith(text)
        return _wildcard_regex(text).fullmatch(probe) is not None


def compile_value(value: str, options: MatcherOptions) -> ValueMatcher | None:
    """RangerAbstractResourceMatcher.getMatcher(); None for a value that matches anything."""
    if options.expressions and _EXPRESSION.search(value):
        raise ValueError(f"resource value {value!r}: ${{{{…}}}} request expressions are not supported")
    first = last = -1
    needs_wildcard = False
    if options.wildcard:
        for i, c in enumerate(value):
            if c == "?":
                needs_wildcard = True
                break
            if c == "*":
                if last in (-1, i - 1):  # still in the first run of '*'
                    last = i
                    first = i if first == -1 else first
                else:
                    needs_wildcard = True
                    break
    kind: Kind
    if needs_wildcard:
        kind, text = "wildcard", value
    elif first == -1:
        kind, text = "equals", value
    elif first == 0:
        kind, text = "ends", value[last + 1 :]
        if not text:
            return None
    elif last != len(value) - 1:
        kind, text = "wildcard", value
    else:
        kind, text = "starts", value[:first]
    if options.tokens and options.tokens.has_token(text):
        return ValueMatcher(kind, text, options.tokens.parse(text), options.ignore_case)
    return ValueMatcher(kind, options.fold(text), None, options.ignore_case)


@dataclass(frozen=True)
class ResourceMatcher:
    """A policy's values for the resource: RangerDefaultResourceMatcher.getMatchType() == SELF."""

    match_any: bool
    excludes: bool
    recursive: bool
    values: tuple[ValueMatcher, ...]
    written: tuple[str, ...]  # the values as written (empty ones too): what the trie indexes

    @classmethod
    def compile(
        cls, values: list[Any], excludes: bool, recursive: bool, options: MatcherOptions
    ) -> ResourceMatcher:
        written = tuple(v for v in values if isinstance(v, str))
        matchers: list[ValueMatcher] = []
        for value in written:
            if not value:
                continue  # Ranger drops empty values
            matcher = compile_value(value, options)
            if matcher is None:
                return cls(True, excludes, recursive, (), written)
            matchers.append(matcher)
        return cls(not matchers, excludes, recursive, tuple(matchers), written)

    @property
    def needs_dynamic_eval(self) -> bool:
        return any(m.segments is not None for m in self.values)

    def matches(self, value: str, probe: str, tokens: Mapping[str, str]) -> bool:
        """``value``: the requested value; ``probe``: the same as compared (``MatcherOptions.fold``)."""
        every_value = value in ("", "*")  # isAllValuesRequested()
        if self.match_any:
            hit = True
        elif every_value:
            hit = False
        else:
            hit = any(m.matches(probe, tokens) for m in self.values)
        if not self.excludes or (every_value and not self.match_any):
            return hit
        return not hit
