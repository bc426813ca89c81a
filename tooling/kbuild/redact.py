"""Keep secrets out of everything kbuild prints: the Hugging Face token and `Authorization`
header values and passwords in URLs, whatever text (a server's error body, a git message)
carries them."""

from __future__ import annotations

import os
import re

MASK = "***"
_AUTHORIZATION = re.compile(r"(authorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;}]+", re.I)
_HF_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{8,}\b")
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@", re.I)


def _tokens() -> list[str]:
    found = [os.environ.get("HF_TOKEN", ""), os.environ.get("HUGGING_FACE_HUB_TOKEN", "")]
    try:
        from huggingface_hub import get_token

        found.append(get_token() or "")
    except ImportError:
        pass
    return [token for token in found if len(token) >= 4]


def scrub(text: str) -> str:
    """`text` with every known token, `hf_...` token, Authorization value and URL password masked."""
    for token in _tokens():
        text = text.replace(token, MASK)
    text = _AUTHORIZATION.sub(lambda match: match.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda match: match.group(1) + MASK + "@", text)
    return _HF_TOKEN.sub(MASK, text)
