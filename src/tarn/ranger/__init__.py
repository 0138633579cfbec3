"""An Apache Ranger policy engine for the ``triton`` service type, faithful to Ranger 2.8.0.

- ``policies``: the ServicePolicies and RangerRoles JSON of Ranger Admin, compiled once into
  frozen dataclasses (policies in Ranger's evaluation order, roles resolved per user and group).
- ``matchers``: RangerDefaultResourceMatcher's value matching (wildcards, ignoreCase, excludes,
  ``{USER}`` tokens), with Java's case folding.
- ``trie``: RangerResourceTrie, the lookup that picks which policies a model is checked against.
- ``engine``: ``Engine.from_json(...).evaluate(...)``: RangerPolicyEngineImpl's access decision,
  audit flag and deciding policy.

Ranger's answers were checked against its own engine (ranger-plugins-common 2.8.0 on Java 17,
``lab/ranger-harness``), quirks included: a fresh engine per request, as after a policy download.

The controller's plugin around it (docs/ranger.md):

- ``settings``: ranger-triton-security.xml (Ranger's property names) from ``--ranger-conf-dir``.
- ``admin``: Ranger Admin's plugin downloads (policies, roles, user store), 304 when unchanged.
- ``state``: what a poll or the cache changes, the decision (fail closed) and its health (pure).
- ``cache``: the documents in ``policy.cache.dir``, in Ranger's own files.
- ``refresher``: the poll thread; ``authorizer``: the decision point the controller's API asks.

Registering the triton service in Ranger Admin (the module tarn.yarn.tarn_ranger; not the controller):

- ``registration_plan``: what is declared, what differs from Admin's objects, the steps (pure).
- ``registration``: one reconcile per object (read, compare, stop in check mode, write, read again).
- ``public_api``: Ranger Admin's public REST API v2 (service defs, services, policies).
"""
