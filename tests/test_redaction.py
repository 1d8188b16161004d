"""Secret redaction: the common credential forms, key blocks across messages, properties."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memmw import redaction
from memmw.redaction import (
    REDACTED,
    RedactingFilter,
    StreamRedactor,
    redact_all,
    redact_secrets,
)

PEM_BODY = [
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK",
    "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo",
]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF5x2yEBCADP0pQ7cXk9aB3sT1u8qPzv\n"
    "=Ab12\n-----END PGP PRIVATE KEY BLOCK-----"
)

#: The 20 forms of issue 9 (9 of them leaked before) plus more common credential shapes.
#: (name, text, secret that must disappear)
FORMS = [
    ("prose-password", "btw my password is Tr0ub4dor&3 for the NAS", "Tr0ub4dor&3"),
    ("prose-password-for", "the password for the wifi is kiwi-banana-42", "kiwi-banana-42"),
    ("passphrase", "passphrase: correct horse battery staple", "correct horse battery staple"),
    ("aws-secret-prose", "my aws secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("short-sk", "try sk-abc123def456 now", "sk-abc123def456"),
    ("pgp-block", f"here it is\n{PGP}\nthanks", "lQOYBF5x2yEBCADP0pQ7cXk9aB3sT1u8qPzv"),
    ("pem-block", f"key:\n{PEM}", PEM_BODY[1]),
    ("azure-account-key",
     "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;"
     "EndpointSuffix=core.windows.net", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA=="),
    ("slack-webhook",
     "post to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"),
    ("pin", "my PIN is 4821", "4821"),
    ("pin-code-for", "the pin code for the door is 90 21", "90 21"),
    ("openai", "use sk-proj-Abcdefghijklmnopqrstuvwx0123456789 please", "Abcdefghijklmnop"),
    ("anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 is mine", "abcdefghijklmnop"),
    ("google", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI ok", "AIzaSyDdI0hCZtE6vySjMm"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 here", "ghp_abcdefghij"),
    ("aws-id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("bearer", "Authorization: Bearer abcdef.ghijkl-123456", "abcdef.ghijkl-123456"),
    ("url-password", "postgres://admin:s3cr3tpass@db.local/prod", "s3cr3tpass"),
    ("slack-token", "xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "dozjgNryP4J3jVmNHl0w5N"),
    ("stripe", "sk_live_51H8abcdefghijklmnopqrstuv", "51H8abcdefghijklmnop"),
    ("sendgrid", "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDE",
     "abcdefghijklmnopqrstuvwxyz0123456789"),
    ("gitlab", "glpat-abcdefghij0123456789", "glpat-abcdefghij0123456789"),
    ("npm", "npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghijklmnop"),
    ("hf", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abcdefghijklmnop"),
    ("conn-string-password", "Server=db;User Id=sa;Password=P@ssw0rd!;", "P@ssw0rd!"),
    ("env-assignment", "export DATABASE_PASSWORD='pa55w0rd-x'", "pa55w0rd-x"),
    ("json", '{"client_secret": "abcd-efgh-1234"}', "abcd-efgh-1234"),
    ("seed-phrase", "my seed phrase is abandon ability able about above absent",
     "abandon ability able"),
    ("openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU"),
]


@pytest.mark.parametrize(("name", "text", "secret"), FORMS, ids=[f[0] for f in FORMS])
def test_common_secret_forms_are_redacted(name: str, text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize(("name", "text", "secret"), FORMS, ids=[f[0] for f in FORMS])
def test_built_in_rules_hold_without_detect_secrets(
    monkeypatch: pytest.MonkeyPatch, name: str, text: str, secret: str
) -> None:
    # detect-secrets is an optional extra: every form above must hold without it.
    monkeypatch.setattr(redaction, "_detect", redaction._DetectSecrets(loaded=True))
    assert secret not in redact_secrets(text)


#: Key and token shapes the transcript source has redacted since the first version.
BASIC_FORMS = [
    ("openai", "use sk-proj-Abcdefghijklmnopqrstuvwx0123456789 please",
     "sk-proj-Abcdefghijklmnopqrstuvwx0123456789"),
    ("openai-legacy", "key sk-Abcdefghijklmnopqrstuvwx01234567", "sk-Abcdefghijklmnopqrstuvwx0"),
    ("anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345 is mine", "sk-ant-api03"),
    ("google", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI ok", "AIzaSyDdI0hCZtE6vySjMm"),
    ("github", "ghp_abcdefghijklmnopqrstuvwxyz0123456789 here", "ghp_abcdefghij"),
    ("github-pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD",
     "github_pat_11ABCDEFG"),
    ("aws-id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws-secret", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI"),
    ("bearer", "curl -H 'Authorization: Bearer eyJhbGciOi.abc-def_123' x", "eyJhbGciOi.abc"),
    ("assignment", "OPENAI_API_KEY=abc123def456", "abc123def456"),
    ("quoted", 'config {"api_key": "zz-top-secret-9"}', "zz-top-secret-9"),
    ("password", "my password: hunter2!", "hunter2!"),
    ("url", "postgres://admin:s3cr3tpass@db.local/prod", "s3cr3tpass"),
    ("slack", "xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
]


@pytest.mark.parametrize(("name", "text", "secret"), BASIC_FORMS, ids=[s[0] for s in BASIC_FORMS])
def test_basic_key_and_token_forms_are_redacted(name: str, text: str, secret: str) -> None:
    out = redact_secrets(text)
    assert secret not in out
    assert REDACTED in out


@pytest.mark.parametrize(
    "text",
    [
        "the gateway runs on port 8080",
        "max_tokens=4000 and 400 tokens per chunk",
        "the author: Jane Austen",
        "Bearer of bad news",
        "ask the skeptic about sk-8",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
        "we reset the password yesterday",
        "pin the version to 3",
        "the design: modern and calm",
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact_secrets(text) == text


def test_pem_split_over_two_messages_is_hidden_whole() -> None:
    first = "here is the key -----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY[0]
    second = "\n".join(PEM_BODY[1:]) + "\n-----END RSA PRIVATE KEY----- and that's all"
    out = redact_all(["hello", first, second, "later: no secret here"])
    joined = "\n".join(out)
    assert not any(line in joined for line in PEM_BODY)
    assert out[0] == "hello" and out[1].startswith("here is the key")
    assert out[2].endswith("and that's all") and out[3] == "later: no secret here"


def test_key_tail_without_its_begin_is_hidden() -> None:
    tail = "\n".join(PEM_BODY) + "\n-----END PRIVATE KEY-----\nthanks"
    out = redact_secrets(tail)
    assert not any(line in out for line in PEM_BODY) and out.endswith("thanks")


def test_stream_redactor_hides_everything_until_the_end_marker() -> None:
    stream = StreamRedactor()
    assert stream.redact("-----BEGIN PRIVATE KEY-----") == REDACTED
    assert stream.redact(PEM_BODY[0]) == REDACTED and stream.in_block
    assert stream.redact("-----END PRIVATE KEY----- ok") == f"{REDACTED} ok"
    assert not stream.in_block


def test_log_filter_redacts_message_arguments_and_tracebacks() -> None:
    record = logging.LogRecord(
        "memmw.x", logging.WARNING, __file__, 1, "provider said %s", ("bad key sk-abc123def456",),
        None,
    )
    try:
        raise RuntimeError("echo: Authorization: Bearer abcdefgh12345678")
    except RuntimeError as exc:
        record.exc_info = (type(exc), exc, exc.__traceback__)
    assert RedactingFilter().filter(record)
    assert "sk-abc123def456" not in record.getMessage()
    assert record.exc_text is not None and "abcdefgh12345678" not in record.exc_text


# -- properties --------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
SECRETS = st.one_of(
    st.text(_ALNUM, min_size=24, max_size=48).map(lambda s: "sk-proj-" + s),
    st.text(_ALNUM, min_size=20, max_size=48).map(lambda s: "sk-" + s),
    st.text(_ALNUM, min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.text(_ALNUM + "-_", min_size=35, max_size=35).map(lambda s: "AIza" + s),
    st.text(_ALNUM, min_size=16, max_size=32).map(lambda s: "sk_live_" + s),
    st.text(_ALNUM, min_size=20, max_size=30).map(lambda s: "glpat-" + s),
)
PROSE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(prefix=PROSE, secret=SECRETS, suffix=PROSE)
def test_a_token_never_survives_whatever_surrounds_it(prefix: str, secret: str, suffix: str) -> None:
    out = redact_secrets(f"{prefix} {secret} {suffix}")
    assert secret not in out


@settings(max_examples=300)
@given(text=PROSE)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once


@settings(max_examples=200)
@given(
    password=st.text(_ALNUM + "!@#$%^&*-_", min_size=4, max_size=24),
    lead=st.sampled_from(["my password is", "password:", "the passcode was", "pwd ="]),
)
def test_passwords_in_prose_are_hidden(password: str, lead: str) -> None:
    out = redact_secrets(f"fyi {lead} {password}")
    assert password not in out


@settings(max_examples=150)
@given(cut=st.integers(min_value=0, max_value=len(PEM)), before=PROSE, after=PROSE)
def test_a_key_split_anywhere_across_two_messages_never_leaks(
    cut: int, before: str, after: str
) -> None:
    assume("-----" not in before + after)
    out = "\n".join(redact_all([before + " " + PEM[:cut], PEM[cut:] + " " + after]))
    for line in PEM_BODY:
        # A fragment left in one message is at most the part the cut split off; a full
        # body line never survives.
        assert line not in out


@settings(max_examples=200)
@given(words=st.lists(st.sampled_from(
    ["the", "gateway", "runs", "on", "port", "memory", "note", "agent", "search", "index",
     "2026", "meeting", "Paris", "config", "tokens", "chunk", "file", "with", "and", "a"]
), max_size=30))
def test_plain_notes_are_left_alone(words: list[str]) -> None:
    text = " ".join(words)
    assert redact_secrets(text) == text
