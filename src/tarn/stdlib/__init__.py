"""Standard library only: what tarn-launcher.pyz ships beside tarn.launcher (it runs in a stock
Triton image, before anything is installed). tests/unit/test_layout.py enforces the rule."""
