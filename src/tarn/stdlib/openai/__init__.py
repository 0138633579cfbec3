"""TARN's OpenAI-compatible front: /v1 beside Triton in each instance, over Triton's generate
extension (docs/openai.md). Standard library only: it runs in the instance's container, like the
launcher. ``mapping`` holds the pure translation, ``counters`` what /metrics shows, ``wire`` the
HTTP/1.1 and server-sent-event framing, ``server`` the asyncio server that ties them together.

    python -m tarn.stdlib.openai --port 9000 --triton-url http://127.0.0.1:8000
"""
