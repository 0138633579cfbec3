"""Hostile-input fuzzing of TARN's HTTP listeners, in process on loopback (issue 48, item 6)."""
