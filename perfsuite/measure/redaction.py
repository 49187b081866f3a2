"""Credentials kept out of every record: what looks like a secret, and how it is redacted.

Environment variables, command lines and argument lists pass through here before a run
record, a fleet status or a terminal line holds them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# A name with one of these words is a secret whatever its prefix (NCCL_IB_..._KEY, say).
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
REDACTED = "<redacted>"
# Secrets recognised by their form, wherever they appear in a value: a private key; the
# tokens of GitHub (classic and fine-grained), GitLab, Slack, Hugging Face, OpenAI-style APIs,
# Stripe and Google APIs; AWS access key ids; a JWT; a URL with a password (an empty user
# too, as in ``redis://:S@host``); a URL query parameter whose name holds token, secret,
# key, pass, auth or sig; an HTTP Authorization value (``Bearer``, ``Basic``, ``Token``);
# and ``password=`` style assignments, also at the end of a longer name
# (``client_secret=``, ``aws_secret_access_key=``, ``pwd=``).  A commit hash (40 hex digits)
# is none of these; a standalone AWS secret access key is matched apart (see
# :func:`_aws_secret`).
_SECRET_FORM = re.compile(
    r"(?i:-----BEGIN [A-Z ]*PRIVATE KEY-----)|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abpr]-"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}|\bglpat-[A-Za-z0-9_-]{16,}"
    r"|\bhf_[A-Za-z0-9]{20,}|\bsk-[A-Za-z0-9_-]{16,}|\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{10,}\.|://[^/\s:@]*:[^/\s@]+@"
    r"|(?i:[?&][^=&\s#]*(?:token|secret|key|pass|auth|sig)[^=&\s#]*=[^&\s#])"
    r"|(?i:\bbearer[\s:=]+[A-Za-z0-9._~+/=-]{4,})|\bBasic\s+[A-Za-z0-9+/]{12,}"
    r"|\b[Tt]oken\s+(?=[A-Za-z0-9._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:aws_secret)"
    r"|(?i:(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key)\s*[=:])"
)
# An AWS secret access key standing alone: 40 characters of base64, at least one of them '/'
# or '+' (so never a commit hash or another hex digest), mixing upper and lower case and digits.
_AWS_CANDIDATE = re.compile(r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _aws_secret(text: str) -> bool:
    """Whether ``text`` holds what can only be an AWS secret access key (see above)."""
    return any(
        re.search(r"[/+]", key)
        and re.search(r"[A-Z]", key)
        and re.search(r"[a-z]", key)
        and re.search(r"[0-9]", key)
        and not key.startswith("/")  # a path: /opt/... is a folder, not a key
        for key in _AWS_CANDIDATE.findall(text)
    )


def secret_form(text: str) -> bool:
    """Whether ``text`` holds a credential by its form (a token, a key, a password)."""
    return bool(_SECRET_FORM.search(text)) or _aws_secret(text)


# A flag that takes a credential: one part of its name (split at '_', '-', '.' and at a
# lower-to-upper case change) is one of these words, so --password, --passphrase, --api-key,
# --access-key, --clientSecret and --hf_token are, and --max_tokens, --passes, --keyfile not.
_SECRET_PART = re.compile(
    r"(?i)pass(?:word|wd|phrase|code)?|pwd|pw|secrets?|token|key|api[_-]?key|"
    r"credentials?|auth"
)
_FLAG = re.compile(r"(-{1,2})([A-Za-z][\w.-]*)(?:([=:])(.*))?", re.DOTALL)
_NAME_PARTS = re.compile(r"[_.-]+|(?<=[a-z0-9])(?=[A-Z])")


def secret_flag(word: str) -> bool:
    """Whether ``word`` is a flag that names a credential (``--access-key``, ``-token``)."""
    match = _FLAG.fullmatch(word)
    if match is None:
        return False
    parts = _NAME_PARTS.split(match.group(2))
    return any(_SECRET_PART.fullmatch(part) for part in parts if part)


def has_secret(text: str) -> bool:
    """Whether ``text`` holds a credential by its form, or a credential flag with a value.

    A flag counts with ``=`` or ``:`` and a value (``--clientSecret=X``), or followed by
    another word (``--passphrase X``).
    """
    if secret_form(text):
        return True
    words = text.split()
    for i, word in enumerate(words):
        match = _FLAG.fullmatch(word)
        if match is None or not secret_flag(word):
            continue
        if match.group(3) is not None or i + 1 < len(words):
            return True
    return False


def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable's name or value looks like a credential."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS) or has_secret(value)


def redact(name: str, value: str) -> str:
    """The value to record: the value itself, or a redaction mark for a secret."""
    return REDACTED if is_secret(name, value) else value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line to record: each credential replaced by the redaction mark.

    ``--key=X`` keeps its flag (``--key=<redacted>``); ``--key X`` keeps the flag and loses
    the next item unless that is another option; an item holding a credential by its form
    (``Bearer X``, ``hf_...``) is replaced whole, and so is an item that makes one with the
    item before it (``Bearer`` then ``X``, as a header split at its space gives).
    """
    out: list[str] = []
    hide_next = False
    for i, item in enumerate(argv):
        if hide_next and not item.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        match = _FLAG.fullmatch(item)
        if match is not None and secret_flag(item):
            if match.group(3) is not None:
                out.append(f"{match.group(1)}{match.group(2)}{match.group(3)}{REDACTED}")
            else:
                out.append(item)
                hide_next = True
            continue
        if secret_form(item):
            out.append(REDACTED)
        elif i and secret_form(f"{argv[i - 1]} {item}") and not secret_form(argv[i - 1]):
            out.append(REDACTED)  # the token of a pair: "Bearer" kept, what follows hidden
        else:
            out.append(item)
    return out


def redact_command(command: str) -> str:
    """A command given as one string (``--perf-launcher``) to record, credentials redacted.

    Split as a shell would, so a quoted ``-H 'Authorization: Bearer X'`` is one item, then
    redacted as :func:`redact_argv` does; a string with no credential is kept as written.
    One that does not split (an unclosed quote) is split at whitespace.
    """
    try:
        argv, split = shlex.split(command), True
    except ValueError:
        argv, split = command.split(), False
    redacted = redact_argv(argv)
    if redacted == argv:
        return command
    if not split:  # its quotes did not pair as written: kept as they were
        return " ".join(redacted)
    return " ".join(
        item if item == REDACTED or (item and not _NEEDS_QUOTES.search(item)) else shlex.quote(item)
        for item in redacted
    )


# Characters that make a recorded item ambiguous unless quoted (``{ranks}`` is kept bare).
_NEEDS_QUOTES = re.compile(r"[\s'\"\\$`;&|<>()*?!#]")
