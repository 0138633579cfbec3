"""The node's model cache (tarn.stdlib.launcher.cache): what eviction takes."""

from __future__ import annotations

from tarn.stdlib.launcher.cache import StoredObject, to_evict


def test_eviction_goes_least_recently_used_first_and_spares_files_in_use() -> None:
    objects = [
        StoredObject("old", 100, 1.0, 1),
        StoredObject("in-use", 100, 0.5, 2),
        StoredObject("needed", 100, 0.1, 1),
        StoredObject("new", 100, 9.0, 1),
    ]
    assert to_evict(objects, keep={"needed"}, bound=300) == ["old"]
    assert to_evict(objects, keep={"needed"}, bound=0) == ["old", "new"]
    assert to_evict(objects, keep=set(), bound=400) == []
