"""The OpenAI front's metric families, declared once (docs/openai.md, "What it counts").

The front writes them (tarn.stdlib.openai.counters); the controller reads them from every front's
/metrics and serves their sums under the same names, types and labels (tarn.controller.fronts,
tarn.controller.llm). A name, a type or a label changes here, for both.
"""

from __future__ import annotations

from tarn.stdlib.exposition import Family

PROMPT_TOKENS = Family(
    "tarn_openai_prompt_tokens",
    "counter",
    "Prompt tokens of generations, by user and model",
    ("user", "model"),
)
COMPLETION_TOKENS = Family(
    "tarn_openai_completion_tokens",
    "counter",
    "Completion tokens generated, by user and model",
    ("user", "model"),
)
REQUESTS = Family(
    "tarn_openai_requests",
    "counter",
    "Generations ended, by user, model and outcome",
    ("user", "model", "outcome"),
)
STREAMS_IN_FLIGHT = Family(
    "tarn_openai_streams_in_flight", "gauge", "Generations streaming from Triton now, by model", ("model",)
)
TIME_TO_FIRST_TOKEN = Family(
    "tarn_openai_time_to_first_token_seconds",
    "histogram",
    "From the request to its first token, by model",
    ("model",),
)
TIME_BETWEEN_TOKENS = Family(
    "tarn_openai_time_between_tokens_seconds",
    "histogram",
    "Between two tokens of a stream, by model",
    ("model",),
)
QUEUED_REQUESTS = Family(
    "tarn_openai_queued_requests",
    "gauge",
    "Requests waiting for one of the model's generation slots now, by user and model",
    ("user", "model"),
)
QUEUE_WAIT = Family(
    "tarn_openai_queue_wait_seconds",
    "histogram",
    "From a request's arrival to its generation slot, by user and model",
    ("user", "model"),
)

# In the order of the text.
FAMILIES = (
    PROMPT_TOKENS,
    COMPLETION_TOKENS,
    REQUESTS,
    STREAMS_IN_FLIGHT,
    TIME_TO_FIRST_TOKEN,
    TIME_BETWEEN_TOKENS,
    QUEUED_REQUESTS,
    QUEUE_WAIT,
)
