"""A stand-in for ``tooltalk.apis.utils`` when torch is not installed.

ToolTalk's published package imports torch and transformers when it loads, to compare free text
(an event's name, an email's body) with DistilBERT embeddings. Its thresholds are 0.9 or 0.8
cosine. That model is a download from the Hugging Face hub. Without torch this module takes the
place of ``tooltalk.apis.utils`` and compares free text lexically instead: difflib's ratio on
case-folded, whitespace-normalised text, against ToolTalk's own thresholds. That is stricter
than embeddings for paraphrases and equal for verbatim values. The workload's scorer hash
includes this file, and ``text_match`` in the records says which comparison was used.
"""
from __future__ import annotations

import difflib
import importlib.util
import re
import sys
import types

TEXT_MATCH = "distilbert" if importlib.util.find_spec("torch") and importlib.util.find_spec("transformers") else "lexical"


def verify_phone_format(phone_number: str) -> bool:
    return re.fullmatch(r"\d{3}-\d{3}-\d{4}", phone_number) is not None


def verify_email_format(email: str) -> bool:
    return re.fullmatch(r"[\w.\-]+@[\w.\-]+", email) is not None


def semantic_str_compare(prediction_text: str | None, ground_truth_text: str) -> float:
    if prediction_text is None:
        return 0.0
    a, b = (" ".join(str(t).lower().split()) for t in (prediction_text, ground_truth_text))
    return difflib.SequenceMatcher(None, a, b).ratio()


def install() -> None:
    """Put the lexical stand-in where ToolTalk's APIs import their helpers from (only without torch)."""
    if TEXT_MATCH == "lexical" and "tooltalk.apis.utils" not in sys.modules:
        shim = types.ModuleType("tooltalk.apis.utils", __doc__)
        for name in ("verify_phone_format", "verify_email_format", "semantic_str_compare"):
            setattr(shim, name, globals()[name])
        sys.modules["tooltalk.apis.utils"] = shim
