"""Keep secrets out of everything kbuild prints: the Hugging Face token and `Authorization`
header values and passwords in URLs, whatever text (a server's error body, a git message, a
value the Hub answers) carries them. `say` is kbuild's only way to print; it scrubs what it prints."""

from __future__ import annotations

import os
import re
import sys

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


def say(text: object = "", *, err: bool = False, end: str = "\n") -> None:
    """Print `text`, scrubbed, to stdout (stderr when `err`), and flush."""
    stream = sys.stderr if err else sys.stdout
    stream.write(scrub(str(text)) + end)
    stream.flush()
