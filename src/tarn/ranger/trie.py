"""RangerResourceTrie (Ranger 2.8.0): which policies a requested value is checked against.

Ranger looks a value up in a trie of the policies' values before matching, and a policy the trie
does not return is never evaluated, not even for audit. The trie is keyed by the literal start
of each value (up to the first ``*``, ``?``, token delimiter or ``$``); a value with a wildcard
(or ``isRecursive``) matches any request passing through its node, one without only a request
ending there. ``isExcludes`` and match-any policies are always returned.

With ``ignoreCase`` the trie steps to a child by ``Character.toLowerCase`` of the next char but
compares node strings with ``regionMatches(ignoreCase)``, and it splits a node at the first
non-ASCII char even when both strings have it there (boxed chars compared by reference). For
the chars where these differ from the matchers' comparison (dotless i, long s, final sigma,
micro sign, surrogate pairs…) Ranger skips policies its matchers would match, and so must we:
the trie is rebuilt here node for node, splits included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tarn.ranger.matchers import MatcherOptions, ResourceMatcher, java_units


@dataclass
class _Growing:
    """A node while the trie is built (TrieNode.getOrCreateChild splits nodes in place)."""

    text: str  # Java chars, as written
    children: dict[str, _Growing] = field(default_factory=dict)
    exact: set[int] = field(default_factory=set)
    wild: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class _Node:
    text: str  # as compared: folded when ignoring case
    children: Mapping[str, _Node]  # by the lookup key of the child's first char
    on_path: frozenset[int]  # wildcard entries of this node and its ancestors
    here: frozenset[int]  # on_path and this node's exact entries


@dataclass(frozen=True)
class ResourceTrie:
    root: _Node
    always: frozenset[int]  # excludes (Ranger's inherited evaluators)
    options: MatcherOptions

    @classmethod
    def build(cls, resources: Sequence[tuple[int, ResourceMatcher]], options: MatcherOptions) -> ResourceTrie:
        """``resources``: (policy rank, one of its resource matchers)."""
        root = _Growing("")
        always: set[int] = set()
        for rank, resource in resources:
            if resource.excludes:
                always.add(rank)
            elif resource.match_any:
                root.wild.add(rank)
            else:
                for value in map(java_units, resource.written):
                    prefix = _literal_prefix(value, options.trie_specials)
                    node = _child(root, prefix, options) if prefix else root
                    (node.wild if prefix != value or resource.recursive else node.exact).add(rank)
        return cls(_freeze(root, frozenset(), options), frozenset(always), options)

    def lookup(self, value: str) -> frozenset[int]:
        """Ranks of the policies to evaluate for a (non-empty) requested value."""
        units = java_units(value)
        keys = self.options.lookup(units)
        # a node may hold half a surrogate pair: compare each region on its own, as Java does
        whole = self.options.fold(units) if units.isascii() or max(units) < "\ud800" else None
        node, i = self.root, 0
        while i < len(units):
            child = node.children.get(keys[i])
            if child is None:
                break
            end = i + len(child.text)
            region = whole[i:end] if whole is not None else self.options.fold(units[i:end])
            if region != child.text:
                break
            node, i = child, end
        return self.always | (node.here if i == len(units) else node.on_path)


def _literal_prefix(value: str, specials: str) -> str:
    ends = [i for i in (value.find(c) for c in specials) if i != -1]
    return value[: min(ends)] if ends else value


def _child(node: _Growing, text: str, options: MatcherOptions) -> _Growing:
    """TrieNode.getOrCreateChild(): the node for ``text`` under ``node``, splitting as Ranger does."""
    key = options.lookup(text[0])
    child = node.children.get(key)
    if child is None:
        node.children[key] = child = _Growing(text)
        return child
    if options.fold(child.text) == options.fold(text):
        return child
    shorter = min(len(child.text), len(text))
    common = 1
    while common < shorter and _same_key(options.lookup(child.text[common]), options.lookup(text[common])):
        common += 1
    if common == shorter and len(child.text) <= len(text):
        # ``text`` goes on below the child (Ranger would fail on an empty rest: keep the child)
        return _child(child, text[common:], options) if common < len(text) else child
    # split the child: the common part becomes the parent of the rest
    parent = _Growing(text[:common])
    node.children[key] = parent
    child.text = child.text[common:]
    parent.children[options.lookup(child.text[0])] = child
    return parent if common == len(text) else _child(parent, text[common:], options)


def _same_key(a: str, b: str) -> bool:
    """Ranger compares these keys as boxed Characters with ``!=``: only the cached ones (up to
    U+007F) are ever the same object, so any other char counts as a difference."""
    return a == b and a <= "\x7f"


def _freeze(node: _Growing, inherited: frozenset[int], options: MatcherOptions) -> _Node:
    on_path = inherited | node.wild
    return _Node(
        text=options.fold(node.text),
        children={k: _freeze(c, on_path, options) for k, c in node.children.items()},
        on_path=on_path,
        here=on_path | node.exact,
    )
